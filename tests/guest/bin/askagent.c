// SPDX-License-Identifier: GPL-2.0-only
/*
 * askagent ID FILE: a password agent for the systemd guest (tests/systemd-check):
 * it answers the questions of systemd-ask-password whose Id= is ID with the first
 * line of FILE, as a person at a console agent, Plymouth or any other agent would,
 * and leaves every other question alone. It runs until it is killed.
 *
 * Written from systemd's description of the agent protocol (its document
 * "Password Agents"): a question is a file /run/systemd/ask-password/ask.*,
 * made by renaming (so an agent sees it whole), in an ini-like format with the
 * keys PID=, Socket=, NotAfter= (CLOCK_MONOTONIC microseconds, 0 for none),
 * Message= and Id= under [Ask]; the answer is one datagram to the AF_UNIX
 * socket Socket= names, "+" followed by the password ("-" would cancel), sent by
 * root (the asker checks the sender's credentials).
 *
 * Each question answered or passed over is one line on standard output (the
 * journal), which the test reads: "askagent: answered 'MESSAGE' (Id=ID)".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ASK_DIR "/run/systemd/ask-password"
#define MAX_SEEN 256

struct question {
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char message[512];
	char id[256];
	long pid;
	unsigned long long not_after;
};

/* The names of the files already answered or passed over. */
static char seen[MAX_SEEN][NAME_MAX + 1];
static int nseen;

static int was_seen(const char *name)
{
	for (int i = 0; i < nseen; i++)
		if (strcmp(seen[i], name) == 0)
			return 1;
	return 0;
}

static void remember(const char *name)
{
	size_t n = strnlen(name, NAME_MAX);

	if (nseen < MAX_SEEN) {
		memcpy(seen[nseen], name, n);
		seen[nseen++][n] = '\0';
	}
}

/* The value up to the line's end into DST; a value that does not fit is
 * dropped whole (an empty socket is no question; an empty Id matches no ID). */
static void copy_value(char *dst, size_t size, const char *value)
{
	size_t n = strcspn(value, "\n");

	if (n >= size)
		n = 0;
	memcpy(dst, value, n);
	dst[n] = '\0';
}

/* Reads the [Ask] section of PATH; 0 when it has a socket. */
static int read_question(const char *path, struct question *q)
{
	char line[1024];
	int in_ask = 0;
	FILE *f = fopen(path, "re");

	memset(q, 0, sizeof(*q));
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '[') {
			in_ask = strncmp(line, "[Ask]", 5) == 0;
			continue;
		}
		if (!in_ask)
			continue;
		if (strncmp(line, "Socket=", 7) == 0)
			copy_value(q->socket, sizeof(q->socket), line + 7);
		else if (strncmp(line, "Message=", 8) == 0)
			copy_value(q->message, sizeof(q->message), line + 8);
		else if (strncmp(line, "Id=", 3) == 0)
			copy_value(q->id, sizeof(q->id), line + 3);
		else if (strncmp(line, "PID=", 4) == 0)
			q->pid = strtol(line + 4, NULL, 10);
		else if (strncmp(line, "NotAfter=", 9) == 0)
			q->not_after = strtoull(line + 9, NULL, 10);
	}
	fclose(f);
	return q->socket[0] ? 0 : -1;
}

static unsigned long long now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL;
}

static int answer(const struct question *q, const char *password)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(password);
	char *packet = malloc(len + 1);
	int fd, rc;

	if (!packet)
		return -1;
	packet[0] = '+';
	memcpy(packet + 1, password, len);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", q->socket);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		free(packet);
		return -1;
	}
	rc = sendto(fd, packet, len + 1, 0, (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)(len + 1) ? 0 : -1;
	memset(packet, 0, len + 1);
	free(packet);
	close(fd);
	return rc;
}

/* Looks at every question in the directory once. */
static void scan(const char *want_id, const char *password)
{
	DIR *d = opendir(ASK_DIR);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[512];
		struct question q;

		if (strncmp(e->d_name, "ask.", 4) != 0 || was_seen(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", ASK_DIR, e->d_name);
		if (read_question(path, &q) < 0)
			continue;	/* gone, or not whole: a later event brings it again */
		remember(e->d_name);
		if (strcmp(q.id, want_id) != 0) {
			printf("askagent: left '%s' (Id=%s) to other agents\n", q.message, q.id);
		} else if (q.pid > 0 && kill((pid_t)q.pid, 0) < 0 && errno == ESRCH) {
			printf("askagent: '%s' (Id=%s): its asker %ld is gone\n", q.message, q.id, q.pid);
		} else if (q.not_after && now_usec() > q.not_after) {
			printf("askagent: '%s' (Id=%s): too late (NotAfter=%llu)\n", q.message, q.id, q.not_after);
		} else if (answer(&q, password) < 0) {
			printf("askagent: cannot answer '%s' (Id=%s) on %s: %s\n", q.message, q.id, q.socket,
			       strerror(errno));
		} else {
			printf("askagent: answered '%s' (Id=%s)\n", q.message, q.id);
		}
		fflush(stdout);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	char password[1024];
	char events[4096];
	FILE *f;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: askagent ID FILE\n");
		return 2;
	}
	f = fopen(argv[2], "re");
	if (!f || !fgets(password, sizeof(password), f)) {
		fprintf(stderr, "askagent: cannot read the password from %s\n", argv[2]);
		return 1;
	}
	fclose(f);
	password[strcspn(password, "\n")] = '\0';
	if (mkdir(ASK_DIR, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "askagent: cannot make %s: %s\n", ASK_DIR, strerror(errno));
		return 1;
	}
	fd = inotify_init1(IN_CLOEXEC);
	if (fd < 0 || inotify_add_watch(fd, ASK_DIR, IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
		fprintf(stderr, "askagent: cannot watch %s: %s\n", ASK_DIR, strerror(errno));
		return 1;
	}
	printf("askagent: watching %s for Id=%s\n", ASK_DIR, argv[1]);
	fflush(stdout);
	for (;;) {
		scan(argv[1], password);
		if (read(fd, events, sizeof(events)) < 0 && errno != EINTR) {
			fprintf(stderr, "askagent: inotify: %s\n", strerror(errno));
			return 1;
		}
	}
}
