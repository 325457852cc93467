// SPDX-License-Identifier: GPL-2.0-only
/*
 * torn MAPPED RAW OFFSET SECTOR UNIT SEED: what a torn encryption sector reads
 * back.  Through MAPPED (a crypt mapping whose sector at byte OFFSET lies at
 * the same byte OFFSET of RAW), write the sector SECTOR bytes long with "old"
 * data and take its ciphertext from RAW, then the same with "new" data (every
 * byte of it differs from old).  Then, for each tear, put on RAW a sector made
 * of the old ciphertext's UNIT-byte units and the new one's, as a device
 * writing UNIT bytes atomically may leave it after a power failure, and read
 * the sector back through MAPPED.  One line per tear:
 *
 *   TORN <units> <blocks>
 *
 * <units> is the tear, run-length coded: "n1o7" is the first unit new and the
 * seven after it old.  <blocks> is what each 16-byte block read back, run-
 * length coded the same way: O (all old), N (all new), X (neither: at least one
 * byte is neither old nor new, or the block mixes them); or "error:<name>"
 * when the read failed (EILSEQ: an authenticated mode refused the sector).
 * Every tear is taken where the sector has at most 8 units (all 2^n - 2 mixes
 * of old and new), else a set: the new part a prefix and a suffix of 1, n/4,
 * n/2, 3n/4 and n-1 units, one unit new and one unit old (first, middle,
 * last), every other unit new (both phases), and 8 random mixes from SEED.
 * Exit 0 when every tear was tried, 1 on a failure of the set-up (said on
 * stderr: the ciphertext of some unit did not change, a read or write of the
 * device failed), 2 on bad usage.
 *
 * For tears that happen below the mapping (dm-integrity's journal, replayed by
 * tests/guest/bin/logreplay.c), the same data in two steps:
 *
 *   torn put MAPPED OFFSET SECTOR SEED old|new
 *     write the old or the new data of SEED to the sector and flush
 *   torn check MAPPED OFFSET SECTOR SEED
 *     read the sector and print its <blocks> as above, one line
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 16
#define FEW_UNITS 8
#define RANDOM_TEARS 8

static unsigned char *old_plain, *new_plain, *old_cipher, *new_cipher, *torn, *got;
static size_t sector, unit, units;
static off_t offset;
static int mapped, raw;

static void *alloc_sector(void)
{
	void *p;

	if (posix_memalign(&p, 65536, sector)) {
		fprintf(stderr, "torn: no memory for a %zu-byte buffer\n", sector);
		exit(1);
	}
	return p;
}

static void io(int write, int fd, const char *what, unsigned char *buf)
{
	ssize_t done = write ? pwrite(fd, buf, sector, offset) : pread(fd, buf, sector, offset);

	if (done != (ssize_t)sector) {
		fprintf(stderr, "torn: %s of %zu bytes at %lld: %s\n", what, sector,
			(long long)offset, done < 0 ? strerror(errno) : "short");
		exit(1);
	}
	if (write && fdatasync(fd)) {
		fprintf(stderr, "torn: flush after %s: %s\n", what, strerror(errno));
		exit(1);
	}
}

/* a run-length line of one letter per item */
static void rle(const char *items, size_t n)
{
	size_t i = 0, j;

	while (i < n) {
		for (j = i; j < n && items[j] == items[i]; j++)
			;
		printf("%c%zu", items[i], j - i);
		i = j;
	}
}

/* read the sector through the mapping and print what each block holds */
static void print_blocks(void)
{
	char blocks[65536 / BLOCK];
	size_t b;

	if (pread(mapped, got, sector, offset) != (ssize_t)sector) {
		int err = errno;

		printf("error:%s\n",
		       err == EILSEQ ? "EILSEQ" : err == EIO ? "EIO" : strerror(err));
		return;
	}
	for (b = 0; b < sector / BLOCK; b++) {
		const unsigned char *g = got + b * BLOCK;

		if (!memcmp(g, old_plain + b * BLOCK, BLOCK))
			blocks[b] = 'O';
		else if (!memcmp(g, new_plain + b * BLOCK, BLOCK))
			blocks[b] = 'N';
		else
			blocks[b] = 'X';
	}
	rle(blocks, sector / BLOCK);
	putchar('\n');
}

static void tear(const unsigned char *is_new)
{
	char units_str[65536 / 512 + 1];
	size_t i;

	for (i = 0; i < units; i++) {
		memcpy(torn + i * unit, (is_new[i] ? new_cipher : old_cipher) + i * unit, unit);
		units_str[i] = is_new[i] ? 'n' : 'o';
	}
	io(1, raw, "the torn write to the raw device", torn);
	printf("TORN ");
	rle(units_str, units);
	putchar(' ');
	print_blocks();
}

/* new units [from, to), the others old */
static void tear_range(unsigned char *mask, size_t from, size_t to)
{
	size_t i;

	for (i = 0; i < units; i++)
		mask[i] = i >= from && i < to;
	tear(mask);
}

/* the old and the new data of SEED; returns the generator's state for more */
static uint64_t make_data(unsigned long long seed)
{
	uint64_t rnd = seed * 6364136223846793005ULL + 1442695040888963407ULL;
	size_t i;

	old_plain = alloc_sector();
	new_plain = alloc_sector();
	got = alloc_sector();
	for (i = 0; i < sector; i++) {
		rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
		old_plain[i] = rnd >> 56;
		new_plain[i] = old_plain[i] ^ 0xff;
	}
	return rnd;
}

/* SECTOR from 1024 to 65536, OFFSET a multiple of it; false (said) when not */
static int geometry(const char *off, const char *size)
{
	offset = strtoll(off, NULL, 0);
	sector = strtoul(size, NULL, 0);
	if (sector < 1024 || sector > 65536 || (sector & (sector - 1)) || offset < 0 ||
	    offset % sector) {
		fprintf(stderr, "torn: SECTOR a power of two from 1024 to 65536, OFFSET a multiple of it\n");
		return 0;
	}
	return 1;
}

static int open_mapped(const char *path)
{
	mapped = open(path, O_RDWR | O_DIRECT);
	if (mapped < 0)
		fprintf(stderr, "torn: cannot open %s: %s\n", path, strerror(errno));
	return mapped >= 0;
}

/* torn put|check MAPPED OFFSET SECTOR SEED [old|new] */
static int two_step(int argc, char **argv)
{
	int put = !strcmp(argv[1], "put");

	if (argc != (put ? 7 : 6) || (put && strcmp(argv[6], "old") && strcmp(argv[6], "new"))) {
		fprintf(stderr, "usage: torn put MAPPED OFFSET SECTOR SEED old|new\n"
			"       torn check MAPPED OFFSET SECTOR SEED\n");
		return 2;
	}
	if (!geometry(argv[3], argv[4]))
		return 2;
	if (!open_mapped(argv[2]))
		return 1;
	make_data(strtoull(argv[5], NULL, 0));
	if (put)
		io(1, mapped, "the write through the mapping",
		   strcmp(argv[6], "old") ? new_plain : old_plain);
	else
		print_blocks();
	return 0;
}

int main(int argc, char **argv)
{
	unsigned char mask[65536 / 512];
	size_t i, k, q;
	uint64_t rnd;

	if (argc > 1 && (!strcmp(argv[1], "put") || !strcmp(argv[1], "check")))
		return two_step(argc, argv);
	if (argc != 7) {
		fprintf(stderr, "usage: torn MAPPED RAW OFFSET SECTOR UNIT SEED\n");
		return 2;
	}
	if (!geometry(argv[3], argv[4]))
		return 2;
	unit = strtoul(argv[5], NULL, 0);
	if (unit < 512 || unit >= sector || sector % unit) {
		fprintf(stderr, "torn: UNIT from 512, below SECTOR and dividing it\n");
		return 2;
	}
	units = sector / unit;
	if (!open_mapped(argv[1]))
		return 1;
	raw = open(argv[2], O_RDWR | O_DIRECT);
	if (raw < 0) {
		fprintf(stderr, "torn: cannot open %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	rnd = make_data(strtoull(argv[6], NULL, 0));
	old_cipher = alloc_sector();
	new_cipher = alloc_sector();
	torn = alloc_sector();
	io(1, mapped, "the old write through the mapping", old_plain);
	io(0, raw, "the old ciphertext's read", old_cipher);
	io(1, mapped, "the new write through the mapping", new_plain);
	io(0, raw, "the new ciphertext's read", new_cipher);
	io(0, mapped, "the new data's read back", got);
	if (memcmp(got, new_plain, sector)) {
		fprintf(stderr, "torn: the new data does not read back through the mapping\n");
		return 1;
	}
	for (i = 0; i < units; i++) {
		if (!memcmp(old_cipher + i * unit, new_cipher + i * unit, unit)) {
			fprintf(stderr,
				"torn: unit %zu's ciphertext did not change: a tear there would not show\n",
				i);
			return 1;
		}
	}
	if (units <= FEW_UNITS) {
		for (k = 1; k + 1 < 1U << units; k++) {
			for (i = 0; i < units; i++)
				mask[i] = (k >> i) & 1;
			tear(mask);
		}
		return 0;
	}
	for (q = 0; q < 5; q++) {
		size_t cut[5] = { 1, units / 4, units / 2, units * 3 / 4, units - 1 };

		tear_range(mask, 0, cut[q]);
		tear_range(mask, cut[q], units);
	}
	for (q = 0; q < 3; q++) {
		size_t at[3] = { 0, units / 2, units - 1 };

		tear_range(mask, at[q], at[q] + 1);
		for (i = 0; i < units; i++)
			mask[i] = i != at[q];
		tear(mask);
	}
	for (q = 0; q < 2; q++) {
		for (i = 0; i < units; i++)
			mask[i] = (i & 1) == q;
		tear(mask);
	}
	for (q = 0; q < RANDOM_TEARS; q++) {
		size_t n_new = 0;

		for (i = 0; i < units; i++) {
			rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
			mask[i] = rnd >> 63;
			n_new += mask[i];
		}
		if (n_new == 0 || n_new == units)
			mask[0] = !mask[0];
		tear(mask);
	}
	return 0;
}
