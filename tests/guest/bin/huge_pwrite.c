// SPDX-License-Identifier: GPL-2.0-only
/*
 * huge_pwrite DEV OFFSET LENGTH SOURCE: write LENGTH bytes of the file SOURCE
 * to DEV at OFFSET with one pwrite() through O_DIRECT, from a buffer of
 * transparent huge pages, as a database with a huge-page buffer pool does.
 * Physically contiguous pages share one bio_vec, so the kernel builds one bio
 * of megabytes from a handful of bio_vecs (from base pages it stops at 256).
 * Prints the bytes of the buffer that huge pages back (AnonHugePages of its
 * mapping, from /proc/self/smaps) and what pwrite() returned.  Exit 0 when
 * the whole length was written, 1 when pwrite() failed or wrote less,
 * 2 on bad usage or when no huge page backs the buffer (then the write
 * proves nothing: the caller says so).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_ALIGN (2UL << 20)

/* kB of AnonHugePages in the smaps entry that holds addr; -1 if none */
static long huge_kb(const void *addr)
{
	unsigned long lo, hi, at = (unsigned long)addr;
	char line[512];
	long kb = -1;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		/* an entry's first line starts with its range in lower-case hex */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    !(line[0] >= 'A' && line[0] <= 'Z'))
			in = lo <= at && at < hi;
		else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	unsigned long long offset, length;
	unsigned char *map, *buf;
	ssize_t done, got;
	long kb;
	int fd, src;

	if (argc != 5) {
		fprintf(stderr, "usage: huge_pwrite DEV OFFSET LENGTH SOURCE\n");
		return 2;
	}
	offset = strtoull(argv[2], NULL, 0);
	length = strtoull(argv[3], NULL, 0);
	if (!length || length % HUGE_ALIGN) {
		fprintf(stderr, "huge_pwrite: LENGTH must be a multiple of %lu\n", HUGE_ALIGN);
		return 2;
	}
	/* map one huge page more, and start at a huge page boundary */
	map = mmap(NULL, length + HUGE_ALIGN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		fprintf(stderr, "huge_pwrite: mmap: %s\n", strerror(errno));
		return 2;
	}
	buf = (unsigned char *)(((unsigned long)map + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1));
	if (buf != map)
		munmap(map, buf - map);
	munmap(buf + length, map + HUGE_ALIGN - buf);
	if (madvise(buf, length, MADV_HUGEPAGE)) {
		fprintf(stderr, "huge_pwrite: madvise(MADV_HUGEPAGE): %s\n", strerror(errno));
		return 2;
	}
	src = open(argv[4], O_RDONLY);
	if (src < 0) {
		fprintf(stderr, "huge_pwrite: open %s: %s\n", argv[4], strerror(errno));
		return 2;
	}
	for (done = 0; (unsigned long long)done < length; done += got) {
		got = read(src, buf + done, length - done);
		if (got <= 0) {
			fprintf(stderr, "huge_pwrite: %s holds fewer than %llu bytes\n", argv[4], length);
			return 2;
		}
	}
	close(src);
	kb = huge_kb(buf);
	printf("huge_pwrite: buffer of %llu bytes, %ld kB of it in huge pages\n", length, kb);
	if (kb <= 0)
		return 2;
	fd = open(argv[1], O_WRONLY | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "huge_pwrite: open %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	done = pwrite(fd, buf, length, (off_t)offset);
	if (done < 0) {
		printf("huge_pwrite: %s %llu bytes at %llu: errno %d (%s)\n", argv[1], length,
		       offset, errno, strerror(errno));
		return 1;
	}
	printf("huge_pwrite: %s: %zd of %llu bytes at %llu written\n", argv[1], done, length,
	       offset);
	close(fd);
	return (unsigned long long)done == length ? 0 : 1;
}
