// SPDX-License-Identifier: GPL-2.0-only
/*
 * atomic_pwrite DEV OFFSET LENGTH BYTE: write LENGTH bytes of BYTE at OFFSET
 * of DEV with one pwritev2(RWF_ATOMIC) through O_DIRECT, as a program that
 * needs the write whole or not at all does.  Exit 0 when the kernel took it,
 * 1 with the errno's name and text when it refused it, 2 on bad usage.
 * The guests' C library predates RWF_ATOMIC (Linux 6.11), hence its value.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040
#endif

int main(int argc, char **argv)
{
	unsigned long long offset, length;
	struct iovec iov;
	ssize_t done;
	void *buf;
	int fd;

	if (argc != 5) {
		fprintf(stderr, "usage: atomic_pwrite DEV OFFSET LENGTH BYTE\n");
		return 2;
	}
	offset = strtoull(argv[2], NULL, 0);
	length = strtoull(argv[3], NULL, 0);
	if (!length || posix_memalign(&buf, 65536, length)) {
		fprintf(stderr, "atomic_pwrite: cannot get a %llu-byte buffer\n", length);
		return 2;
	}
	memset(buf, (int)strtoul(argv[4], NULL, 0), length);
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "atomic_pwrite: open %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	iov.iov_base = buf;
	iov.iov_len = length;
	done = pwritev2(fd, &iov, 1, (off_t)offset, RWF_ATOMIC);
	if (done < 0) {
		printf("atomic_pwrite: %s %llu bytes at %llu: errno %d (%s)\n", argv[1],
		       length, offset, errno, strerror(errno));
		return 1;
	}
	if ((unsigned long long)done != length) {
		printf("atomic_pwrite: %s: a short atomic write, %zd of %llu bytes\n", argv[1],
		       done, length);
		return 1;
	}
	return close(fd) ? 1 : 0;
}
