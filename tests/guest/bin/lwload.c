// SPDX-License-Identifier: GPL-2.0-only
/*
 * lwload: a file system workload for the log-writes test (tests/guest/logwrites.sh).
 *
 *   lwload run DIR OPS SEED [DM-NAME]
 *     OPS operations in DIR, chosen by a generator seeded with SEED: creates
 *     (with data), appends, overwrites, truncates, renames (within and across
 *     eight directories, some over an existing file), deletes, and fsyncs.
 *     After each fsync, where DM-NAME (a dm-log-writes mapping) is given, it
 *     sends the mapping "mark fN" (N counting the fsyncs from 1) and prints
 *       FSYNC fN <path under DIR> <size> <hash>
 *     what that file must hold wherever the log is replayed to the mark. At
 *     the end: "LOAD ops <n> creates <c> appends <a> overwrites <o> truncates
 *     <t> renames <r> deletes <d> fsyncs <f>".
 *
 *   lwload verify FILE SIZE HASH
 *     Exit 0 when FILE has SIZE bytes whose hash is HASH; else say what it
 *     has on stdout and exit 1.
 *
 *   lwload sums DIR
 *     A line per regular file under DIR, sorted by path:
 *       <path under DIR> <size> <hash> <hash of each 4096-byte block>...
 *     (the last block as long as the file has it), so that two listings
 *     tell, block by block, which data a file holds of each
 *     (tests/guest/logwrites.sh compares the torn states' with the states
 *     before and after them).
 *
 * The hash is 64-bit FNV-1a, in hex.  Exit 1 on an error (said on stderr), 2
 * on bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/dm-ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIRS 8
#define MAX_FILES 160
#define MAX_SIZE (320 << 10)
#define CHUNK (128 << 10)
#define BLOCK 4096

static uint64_t rng;
static int dirfd_top;
static char names[MAX_FILES][32];
static int nfiles, serial;
static unsigned char data[CHUNK];

static uint64_t next(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dULL;
}

static unsigned below(unsigned n)
{
	return (unsigned)(next() % n);
}

static void fail(const char *what, const char *name)
{
	fprintf(stderr, "lwload: %s %s: %s\n", what, name, strerror(errno));
	exit(1);
}

static void fill(size_t len)
{
	size_t i;
	uint64_t v = next();

	for (i = 0; i < len; i++) {
		if (!(i & 7))
			v = next();
		data[i] = (unsigned char)(v >> ((i & 7) * 8));
	}
}

static void write_some(int fd, const char *name, off_t at, size_t len)
{
	while (len) {
		size_t n = len < CHUNK ? len : CHUNK;

		fill(n);
		if (pwrite(fd, data, n, at) != (ssize_t)n)
			fail("write", name);
		at += n;
		len -= n;
	}
}

#define FNV_START 0xcbf29ce484222325ULL

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t len)
{
	while (len--)
		h = (h ^ *p++) * 0x100000001b3ULL;
	return h;
}

static uint64_t hash_fd(int fd, const char *name, off_t *size)
{
	uint64_t h = FNV_START;
	off_t at = 0;
	ssize_t n;

	while ((n = pread(fd, data, CHUNK, at)) > 0) {
		h = fnv(h, data, (size_t)n);
		at += n;
	}
	if (n < 0)
		fail("read", name);
	*size = at;
	return h;
}

/* send "mark NAME" to the dm-log-writes mapping DEV, as dmsetup message does */
static void mark(const char *dev, const char *name)
{
	static union { struct dm_ioctl io; char b[4096]; } u;
	struct dm_target_msg *msg;
	int ctl = open("/dev/mapper/control", O_RDWR);

	if (ctl < 0)
		fail("open", "/dev/mapper/control");
	memset(&u, 0, sizeof(u));
	u.io.version[0] = DM_VERSION_MAJOR;
	u.io.data_size = sizeof(u);
	u.io.data_start = sizeof(u.io);
	snprintf(u.io.name, sizeof(u.io.name), "%s", dev);
	msg = (struct dm_target_msg *)(u.b + u.io.data_start);
	msg->sector = 0;
	snprintf(msg->message, sizeof(u) - u.io.data_start - sizeof(*msg), "mark %s", name);
	if (ioctl(ctl, DM_TARGET_MSG, &u.io))
		fail("message to", dev);
	close(ctl);
}

static int open_file(const char *name, int flags)
{
	int fd = openat(dirfd_top, name, flags, 0644);

	if (fd < 0)
		fail("open", name);
	return fd;
}

static void new_name(char *out)
{
	snprintf(out, 32, "d%u/f%d", below(DIRS), serial++);
}

static int run(const char *dir, long ops, const char *dev)
{
	long op, creates = 0, appends = 0, overwrites = 0, truncates = 0, renames = 0, deletes = 0, fsyncs = 0;
	char path[32];
	struct stat st;
	int i, fd;

	dirfd_top = open(dir, O_RDONLY | O_DIRECTORY);
	if (dirfd_top < 0)
		fail("open", dir);
	for (i = 0; i < DIRS; i++) {
		snprintf(path, sizeof(path), "d%d", i);
		if (mkdirat(dirfd_top, path, 0755) && errno != EEXIST)
			fail("mkdir", path);
	}
	for (op = 0; op < ops; op++) {
		unsigned r = below(100);
		int k = nfiles ? (int)below(nfiles) : -1;

		if (k < 0 || (r < 24 && nfiles < MAX_FILES)) {
			new_name(names[nfiles]);
			fd = open_file(names[nfiles], O_WRONLY | O_CREAT | O_TRUNC);
			write_some(fd, names[nfiles], 0, 1 + below(3 * 65536));
			close(fd);
			nfiles++;
			creates++;
		} else if (r < 48) {
			fd = open_file(names[k], O_WRONLY);
			if (fstat(fd, &st))
				fail("stat", names[k]);
			if (st.st_size > MAX_SIZE) {
				if (ftruncate(fd, below(65536)))
					fail("truncate", names[k]);
				truncates++;
			} else {
				write_some(fd, names[k], st.st_size, 1 + below(100000));
				appends++;
			}
			close(fd);
		} else if (r < 60) {
			fd = open_file(names[k], O_WRONLY);
			if (fstat(fd, &st))
				fail("stat", names[k]);
			write_some(fd, names[k], st.st_size ? below(st.st_size) : 0, 1 + below(20000));
			close(fd);
			overwrites++;
		} else if (r < 78) {
			int over = nfiles > 1 ? (int)below(nfiles) : k;

			/* a third of the renames replace another file */
			if (over != k && below(3) == 0) {
				if (renameat(dirfd_top, names[k], dirfd_top, names[over]))
					fail("rename", names[k]);
				memcpy(names[k], names[--nfiles], sizeof(names[k]));
			} else {
				new_name(path);
				if (renameat(dirfd_top, names[k], dirfd_top, path))
					fail("rename", names[k]);
				memcpy(names[k], path, sizeof(path));
			}
			renames++;
		} else if (r < 94) {
			if (unlinkat(dirfd_top, names[k], 0))
				fail("unlink", names[k]);
			memcpy(names[k], names[--nfiles], sizeof(names[k]));
			deletes++;
		} else {
			uint64_t h;
			off_t size;
			char m[32];

			fd = open_file(names[k], O_RDONLY);
			if (r < 97 ? fsync(fd) : fdatasync(fd))
				fail("fsync", names[k]);
			fsyncs++;
			if (dev) {
				h = hash_fd(fd, names[k], &size);
				snprintf(m, sizeof(m), "f%ld", fsyncs);
				mark(dev, m);
				printf("FSYNC %s %s %lld %016llx\n", m, names[k], (long long)size,
				       (unsigned long long)h);
			}
			close(fd);
		}
	}
	printf("LOAD ops %ld creates %ld appends %ld overwrites %ld truncates %ld renames %ld deletes %ld fsyncs %ld\n",
	       ops, creates, appends, overwrites, truncates, renames, deletes, fsyncs);
	return 0;
}

static int verify(const char *file, const char *size, const char *hash)
{
	int fd = open(file, O_RDONLY);
	off_t got_size;
	uint64_t h;
	char got[20];

	if (fd < 0) {
		printf("%s: %s\n", file, strerror(errno));
		return 1;
	}
	h = hash_fd(fd, file, &got_size);
	close(fd);
	snprintf(got, sizeof(got), "%016llx", (unsigned long long)h);
	if (got_size == strtoll(size, NULL, 10) && !strcmp(got, hash))
		return 0;
	printf("%s: %lld bytes, hash %s; fsync left %s bytes, hash %s\n", file,
	       (long long)got_size, got, size, hash);
	return 1;
}

static char **paths;
static size_t npaths;
static size_t top_len;

static int add_path(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	paths = realloc(paths, (npaths + 1) * sizeof(*paths));
	if (!paths || !(paths[npaths] = strdup(path + top_len)))
		fail("list", "(no memory)");
	npaths++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int sums(const char *dir)
{
	static unsigned char block[BLOCK];
	size_t k;

	top_len = strlen(dir) + 1;
	if (nftw(dir, add_path, 16, FTW_PHYS))
		fail("walk", dir);
	qsort(paths, npaths, sizeof(*paths), by_name);
	dirfd_top = open(dir, O_RDONLY | O_DIRECTORY);
	if (dirfd_top < 0)
		fail("open", dir);
	for (k = 0; k < npaths; k++) {
		int fd = open_file(paths[k], O_RDONLY);
		off_t size, at = 0;
		uint64_t h = hash_fd(fd, paths[k], &size);
		ssize_t n;

		printf("%s %lld %016llx", paths[k], (long long)size, (unsigned long long)h);
		while ((n = pread(fd, block, BLOCK, at)) > 0) {
			printf(" %016llx", (unsigned long long)fnv(FNV_START, block, (size_t)n));
			at += n;
		}
		if (n < 0)
			fail("read", paths[k]);
		printf("\n");
		close(fd);
		free(paths[k]);
	}
	free(paths);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "run")) {
		rng = strtoull(argv[4], NULL, 10) * 0x9e3779b97f4a7c15ULL + 1;
		setvbuf(stdout, NULL, _IOLBF, 0);
		return run(argv[2], strtol(argv[3], NULL, 10), argc == 6 ? argv[5] : NULL);
	}
	if (argc == 5 && !strcmp(argv[1], "verify"))
		return verify(argv[2], argv[3], argv[4]);
	if (argc == 3 && !strcmp(argv[1], "sums"))
		return sums(argv[2]);
	fprintf(stderr, "usage: lwload run DIR OPS SEED [DM-NAME] | lwload verify FILE SIZE HASH | lwload sums DIR\n");
	return 2;
}
