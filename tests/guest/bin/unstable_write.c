// SPDX-License-Identifier: GPL-2.0-only
/*
 * unstable_write DEV LENGTH COUNT: write the first LENGTH bytes of DEV COUNT
 * times with O_DIRECT from one buffer that a second thread keeps changing
 * meanwhile, as a program may whose pages nothing makes stable while they are
 * written.  Exit 0 when every write was taken, 1 with the errno's text when
 * one failed, 2 on bad usage.  What reads back is the test's to judge.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_int stop;

struct target {
	volatile unsigned char *buf;
	size_t len;
};

/* flip bytes all over the buffer until told to stop */
static void *scribble(void *arg)
{
	struct target *t = arg;
	size_t i = 0;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		t->buf[i] ^= 0x5a;
		i = (i + 61) % t->len;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long length, count, n;
	struct target t;
	pthread_t thread;
	void *buf;
	int fd, err = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: unstable_write DEV LENGTH COUNT\n");
		return 2;
	}
	length = strtoul(argv[2], NULL, 0);
	count = strtoul(argv[3], NULL, 0);
	if (!length || !count || length % 4096) {
		fprintf(stderr, "unstable_write: LENGTH must be a multiple of 4096, COUNT above 0\n");
		return 2;
	}
	if (posix_memalign(&buf, 65536, length)) {
		fprintf(stderr, "unstable_write: no memory for %lu bytes\n", length);
		return 2;
	}
	memset(buf, 0xa5, length);
	fd = open(argv[1], O_WRONLY | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "unstable_write: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	t.buf = buf;
	t.len = length;
	if (pthread_create(&thread, NULL, scribble, &t)) {
		fprintf(stderr, "unstable_write: cannot start the second thread\n");
		return 2;
	}
	for (n = 0; n < count && !err; n++)
		if (pwrite(fd, buf, length, 0) != (ssize_t)length)
			err = errno ? errno : EIO;
	atomic_store(&stop, 1);
	pthread_join(thread, NULL);
	close(fd);
	if (err) {
		fprintf(stderr, "unstable_write: write %lu of %lu: %s\n", n, count, strerror(err));
		return 1;
	}
	return 0;
}
