// SPDX-License-Identifier: GPL-2.0-only
/*
 * logreplay: replay a dm-log-writes log onto an image, stopping at its flush,
 * FUA and mark points so that a caller can check the image at each one.
 *
 *   logreplay list LOG [each]
 *     One line: "LOG entries <n> writes <w> flushes <f> fuas <u> marks <m>
 *     discards <d> points <p> bytes <b> sectorsize <s>", where a point is an
 *     entry with the flush, FUA or mark flag; with each, first a line per
 *     entry: "ENTRY <entry> <sector> <sectors> <flags> <mark or ->".
 *
 *   logreplay replay LOG IMAGE [OPTION...]
 *     Write the log's entries in order to IMAGE (a file or block device laid
 *     out as the logged device was). At a point, print
 *       POINT <point> <entry> <flags> <mark or ->
 *     (point and entry counted from 1; flags as letters: F flush, U FUA,
 *     M mark, D discard, or -), then read one line from stdin: "go" goes on,
 *     anything else (or EOF) stops. At the end print "END <entries> <points>".
 *     Options:
 *       every=K     stop at every K-th point only (and at the last one)
 *       each        make every entry a point, plain writes too (flags "-"):
 *                   a power failure may come after any write; and stop
 *                   first before the first entry, as "POINT 0 0 - -".
 *                   With tear=, each point first gets a stop with only the
 *                   next write torn (the one in flight: "TORN1", as TORN),
 *                   then the stop of tear=
 *       drop=K      a control: lose the writes logged before every K-th flush
 *                   (those the device had acknowledged as flushed), as a
 *                   target that broke its flush promise would leave them
 *       tear=UNIT   after stopping at a point, lay the writes up to the next
 *                   flush that follows one (all a device may hold unflushed
 *                   at a power failure; FUA writes among them included) torn:
 *                   of each write longer than UNIT, only every other
 *                   UNIT-byte unit (the first, third, ...) new, as a device
 *                   that writes UNIT bytes atomically may leave them; print
 *                   "TORN <point> <writes> <torn writes> <units kept old>",
 *                   wait for a line as at a point, then put the old contents
 *                   back and go on.
 *       lose=START:BYTES
 *                   a control: the bytes of the image from START on (BYTES of
 *                   them) are never written (the log's writes there lost,
 *                   as a device that dropped them would leave them); up to
 *                   8 ranges, without tear=
 *       whole       with tear=, before each TORN stop a stop with the same
 *                   writes laid whole (every unit new: the state after the
 *                   next flush), printed "WHOLE <point> <writes> 0 0", so that
 *                   a caller can tell in a torn state which data is old, new
 *                   or neither
 *
 * The log's format (dm-log-writes): a super block in the first sector (of the
 * logged device's logical block size): le64 magic 0x6a736677736872, le64
 * version 1, le64 number of entries, le32 sector size. Then, from the second
 * sector, each entry: one sector holding le64 sector, le64 number of sectors,
 * le64 flags, le64 length of its data (a mark's name, which follows in the
 * same sector), then the data written (number of sectors times the sector
 * size; none for a discard or a mark). Sector numbers count sectors of that
 * size. Flags: 1 flush, 2 FUA, 4 discard, 8 mark, 16 metadata.
 * Exit 0 when done, 1 on a bad log or an I/O error (said on stderr), 2 on bad
 * usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC 0x6a736677736872ULL
#define F_FLUSH 1u
#define F_FUA 2u
#define F_DISCARD 4u
#define F_MARK 8u
#define POINT_FLAGS (F_FLUSH | F_FUA | F_MARK)
#define ALL_POINTS 0		/* option each: every entry is a point */

struct entry {
	uint64_t sector, nr, flags, len;
	char mark[512];
	off_t data;		/* where its data lies in the log */
};

static int log_fd;
static uint32_t ss;		/* the log's sector size */
static uint64_t nr_entries;

static void die(const char *fmt, const char *what)
{
	fprintf(stderr, "logreplay: ");
	fprintf(stderr, fmt, what, strerror(errno));
	fputc('\n', stderr);
	exit(1);
}

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void read_at(int fd, void *buf, size_t len, off_t at, const char *what)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, at + done);

		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			die("reading %s: %s", what);
		}
		done += n;
	}
}

static void write_at(int fd, const void *buf, size_t len, off_t at)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, at + done);

		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			die("writing the %s: %s", "image");
		}
		done += n;
	}
}

static void open_log(const char *path)
{
	unsigned char super[28];

	log_fd = open(path, O_RDONLY);
	if (log_fd < 0)
		die("%s: %s", path);
	read_at(log_fd, super, sizeof(super), 0, "the super block");
	if (le64(super) != MAGIC) {
		fprintf(stderr, "logreplay: %s: no dm-log-writes super block (magic %llx)\n",
			path, (unsigned long long)le64(super));
		exit(1);
	}
	nr_entries = le64(super + 16);
	ss = super[24] | super[25] << 8 | super[26] << 16 | (uint32_t)super[27] << 24;
	if (ss < 512 || ss > 65536 || (ss & (ss - 1))) {
		fprintf(stderr, "logreplay: %s: sector size %u in the super block\n", path, ss);
		exit(1);
	}
}

/* read the entry at *pos into e and move *pos past it and its data */
static void next_entry(off_t *pos, struct entry *e)
{
	unsigned char *head = malloc(ss);

	if (!head)
		die("%s: %s", "no memory");
	read_at(log_fd, head, ss, *pos, "an entry");
	e->sector = le64(head);
	e->nr = le64(head + 8);
	e->flags = le64(head + 16);
	e->len = le64(head + 24);
	e->mark[0] = 0;
	if (e->flags & F_MARK) {
		size_t n = e->len < sizeof(e->mark) - 1 ? e->len : sizeof(e->mark) - 1;

		if (n > ss - 32)
			n = ss - 32;
		memcpy(e->mark, head + 32, n);
		e->mark[n] = 0;
	}
	free(head);
	*pos += ss;
	e->data = *pos;
	if (!(e->flags & (F_DISCARD | F_MARK)))
		*pos += (off_t)(e->nr * ss);
}

static void flag_letters(uint64_t flags, char *out)
{
	char *p = out;

	if (flags & F_FLUSH)
		*p++ = 'F';
	if (flags & F_FUA)
		*p++ = 'U';
	if (flags & F_MARK)
		*p++ = 'M';
	if (flags & F_DISCARD)
		*p++ = 'D';
	if (p == out)
		*p++ = '-';
	*p = 0;
}

static int list(int each)
{
	uint64_t i, writes = 0, flushes = 0, fuas = 0, marks = 0, discards = 0, points = 0, bytes = 0;
	off_t pos = ss;
	struct entry e;

	for (i = 0; i < nr_entries; i++) {
		next_entry(&pos, &e);
		if (each) {
			char flags[8];

			flag_letters(e.flags, flags);
			printf("ENTRY %llu %llu %llu %s %s\n", (unsigned long long)i + 1,
			       (unsigned long long)e.sector, (unsigned long long)e.nr, flags,
			       e.mark[0] ? e.mark : "-");
		}
		flushes += !!(e.flags & F_FLUSH);
		fuas += !!(e.flags & F_FUA);
		marks += !!(e.flags & F_MARK);
		discards += !!(e.flags & F_DISCARD);
		points += !!(e.flags & POINT_FLAGS);
		if (e.nr && !(e.flags & (F_DISCARD | F_MARK))) {
			writes++;
			bytes += e.nr * ss;
		}
	}
	printf("LOG entries %llu writes %llu flushes %llu fuas %llu marks %llu discards %llu points %llu bytes %llu sectorsize %u\n",
	       (unsigned long long)nr_entries, (unsigned long long)writes,
	       (unsigned long long)flushes, (unsigned long long)fuas,
	       (unsigned long long)marks, (unsigned long long)discards,
	       (unsigned long long)points, (unsigned long long)bytes, ss);
	return 0;
}

static unsigned char *buf;
static size_t buf_size;

/* lose=: the byte ranges of the image never written */
#define MAX_LOST 8
static struct { off_t start, end; } lost[MAX_LOST];
static int nr_lost;

static unsigned char *buffer(size_t len)
{
	if (len > buf_size) {
		free(buf);
		buf = malloc(len);
		if (!buf)
			die("%s: %s", "no memory");
		buf_size = len;
	}
	return buf;
}

/* apply one entry's data to the image; a discard writes zeros */
static void apply(int img, const struct entry *e)
{
	size_t len = e->nr * ss;
	unsigned char *p;

	if (!len || (e->flags & F_MARK))
		return;
	p = buffer(len);
	if (e->flags & F_DISCARD)
		memset(p, 0, len);
	else
		read_at(log_fd, p, len, e->data, "an entry's data");
	for (int k = 0; k < nr_lost; k++) {
		off_t a = (off_t)(e->sector * ss), b = a + (off_t)len;
		off_t from = a > lost[k].start ? a : lost[k].start;
		off_t to = b < lost[k].end ? b : lost[k].end;

		/* what the image holds there stays: the write's bytes are lost */
		if (from < to)
			read_at(img, p + (from - a), (size_t)(to - from), from, "the image");
	}
	write_at(img, p, len, (off_t)(e->sector * ss));
}

/* wait for the caller's "go"; false when it said anything else */
static int wait_go(void)
{
	char line[64];

	fflush(stdout);
	return fgets(line, sizeof(line), stdin) && !strcmp(line, "go\n");
}

/* what torn() lays: the next write torn, the writes up to the next flush torn, or those whole */
enum lay { LAY_TORN1, LAY_TORN, LAY_WHOLE };

/*
 * Lay the writes from entry index `from` up to the next flush as `how` says:
 * torn (only the first of them for LAY_TORN1: every other unit new) or whole.
 * Wait for the caller, then put the old contents back.
 */
static int torn(int img, off_t pos, uint64_t from, uint64_t point, size_t unit, enum lay how)
{
	static const char *const stop_name[] = { "TORN1", "TORN", "WHOLE" };
	uint64_t i, writes = 0, torn_writes = 0, kept_old = 0;
	struct saved { off_t at; size_t len; unsigned char *old; } *saved = NULL;
	size_t nsaved = 0, k;
	struct entry e;
	int go;

	for (i = from; i < nr_entries; i++) {
		size_t len, u;
		unsigned char *old;

		next_entry(&pos, &e);
		len = e.nr * ss;
		if (!len || (e.flags & (F_DISCARD | F_MARK))) {
			if ((e.flags & F_FLUSH) && writes)
				break;
			continue;
		}
		old = malloc(len);
		saved = realloc(saved, (nsaved + 1) * sizeof(*saved));
		if (!old || !saved)
			die("%s: %s", "no memory");
		read_at(img, old, len, (off_t)(e.sector * ss), "the image");
		saved[nsaved++] = (struct saved){ (off_t)(e.sector * ss), len, old };
		writes++;
		torn_writes += how != LAY_WHOLE && len > unit;
		for (u = 0; u * unit < len; u++) {
			size_t ulen = len - u * unit < unit ? len - u * unit : unit;

			if (how != LAY_WHOLE && len > unit && (u & 1)) {
				kept_old++;
				continue;
			}
			read_at(log_fd, buffer(ulen), ulen, e.data + (off_t)(u * unit), "an entry's data");
			write_at(img, buf, ulen, (off_t)(e.sector * ss + u * unit));
		}
		if ((e.flags & F_FLUSH) || how == LAY_TORN1)
			break;
	}
	printf("%s %llu %llu %llu %llu\n", stop_name[how], (unsigned long long)point,
	       (unsigned long long)writes, (unsigned long long)torn_writes,
	       (unsigned long long)kept_old);
	go = wait_go();
	/* put back in reverse order: a range written twice gets its first old contents */
	for (k = nsaved; k-- > 0;) {
		write_at(img, saved[k].old, saved[k].len, saved[k].at);
		free(saved[k].old);
	}
	free(saved);
	return go;
}

static int is_point(const struct entry *e, uint64_t point_flags)
{
	return point_flags == ALL_POINTS || (e->flags & point_flags);
}

static int replay(const char *image, int argc, char **argv)
{
	uint64_t i, every = 1, drop = 0, points = 0, last_point = 0, flushes = 0, pending = 0;
	uint64_t point_flags = POINT_FLAGS;
	size_t unit = 0;
	off_t pos = ss, seg_start;
	struct entry e;
	int img, n, whole = 0;
	char flags[8];

	for (n = 0; n < argc; n++) {
		if (!strncmp(argv[n], "every=", 6))
			every = strtoull(argv[n] + 6, NULL, 10);
		else if (!strncmp(argv[n], "drop=", 5))
			drop = strtoull(argv[n] + 5, NULL, 10);
		else if (!strncmp(argv[n], "tear=", 5))
			unit = strtoull(argv[n] + 5, NULL, 10);
		else if (!strcmp(argv[n], "each"))
			point_flags = ALL_POINTS;
		else if (!strcmp(argv[n], "whole"))
			whole = 1;
		else if (!strncmp(argv[n], "lose=", 5)) {
			char *end;
			unsigned long long start = strtoull(argv[n] + 5, &end, 10), bytes;

			bytes = *end == ':' ? strtoull(end + 1, &end, 10) : 0;
			if (*end || !bytes || nr_lost == MAX_LOST) {
				fprintf(stderr, "logreplay: lose=START:BYTES (bytes at least 1, at most %d ranges): %s\n",
					MAX_LOST, argv[n]);
				return 2;
			}
			lost[nr_lost].start = (off_t)start;
			lost[nr_lost++].end = (off_t)(start + bytes);
		} else {
			fprintf(stderr, "logreplay: unknown option %s\n", argv[n]);
			return 2;
		}
	}
	if (!every || (unit && (unit < 512 || unit % 512)) || (drop && point_flags == ALL_POINTS) ||
	    (whole && (!unit || drop)) || (nr_lost && unit)) {
		fprintf(stderr,
			"logreplay: every= must be at least 1, tear= a multiple of 512; drop= goes without each; whole needs tear= and no drop=; lose= goes without tear=\n");
		return 2;
	}
	img = open(image, O_RDWR);
	if (img < 0)
		die("%s: %s", image);
	/* the last point, so that it is always one to stop at */
	for (i = 0; i < nr_entries; i++) {
		next_entry(&pos, &e);
		if (is_point(&e, point_flags))
			last_point = ++points;
	}
	pos = ss;
	points = 0;
	/*
	 * For drop=, the writes since the last flush are held back (their
	 * positions in the log) and applied or lost when the flush comes.
	 */
	seg_start = pos;
	/* each: the image before the first entry is a point too (0) */
	if (point_flags == ALL_POINTS) {
		printf("POINT 0 0 - -\n");
		if (!wait_go() || (unit && (!torn(img, pos, 0, 0, unit, LAY_TORN1) ||
					     (whole && !torn(img, pos, 0, 0, unit, LAY_WHOLE)) ||
					     !torn(img, pos, 0, 0, unit, LAY_TORN))))
			goto out;
	}
	for (i = 0; i < nr_entries; i++) {
		off_t here = pos;

		next_entry(&pos, &e);
		if (drop) {
			if (!(e.flags & F_FLUSH)) {
				if (!pending++)
					seg_start = here;
				if (!(e.flags & POINT_FLAGS))
					continue;
			} else {
				off_t p = seg_start;
				uint64_t j;
				struct entry w;

				if (++flushes % drop)
					for (j = 0; j < pending; j++) {
						next_entry(&p, &w);
						apply(img, &w);
					}
				pending = 0;
			}
		}
		if (!drop || (e.flags & F_FLUSH))
			apply(img, &e);
		if (!is_point(&e, point_flags))
			continue;
		points++;
		if (points % every && points != last_point)
			continue;
		flag_letters(e.flags, flags);
		printf("POINT %llu %llu %s %s\n", (unsigned long long)points,
		       (unsigned long long)i + 1, flags, e.mark[0] ? e.mark : "-");
		if (!wait_go())
			goto out;
		if (unit && !drop && point_flags == ALL_POINTS &&
		    !torn(img, pos, i + 1, points, unit, LAY_TORN1))
			goto out;
		if (whole && !torn(img, pos, i + 1, points, unit, LAY_WHOLE))
			goto out;
		if (unit && !drop && !torn(img, pos, i + 1, points, unit, LAY_TORN))
			goto out;
	}
	printf("END %llu %llu\n", (unsigned long long)nr_entries, (unsigned long long)points);
out:
	fflush(stdout);
	if (fsync(img))
		die("flushing the %s: %s", "image");
	close(img);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 3 || (argc == 4 && !strcmp(argv[3], "each"))) && !strcmp(argv[1], "list")) {
		open_log(argv[2]);
		return list(argc == 4);
	}
	if (argc >= 4 && !strcmp(argv[1], "replay")) {
		open_log(argv[2]);
		return replay(argv[3], argc - 4, argv + 4);
	}
	fprintf(stderr, "usage: logreplay list LOG [each] | logreplay replay LOG IMAGE [every=K] [drop=K] [each] [lose=START:BYTES]... [tear=UNIT [whole]]\n");
	return 2;
}
