// SPDX-License-Identifier: GPL-2.0-only
/*
 * dmfuzz: feed device-mapper tables and target messages from a case file to the
 * kernel through the ioctl interface (/dev/mapper/control), one device per case,
 * and print one line per case. No dmsetup: a process start costs ~0.25 s under
 * TCG, one ioctl a fraction of a millisecond.
 *
 *   dmfuzz CASES [TARGET]
 *
 * CASES has one case a line, tab-separated (the format of qemu/lib/fuzz_tables.py):
 *   ID  KIND  TARGET  FLAGS  OP  LENGTH  PARAMS  [STEPS]
 * OP is "table" (create a device with "0 LENGTH TARGET PARAMS") or "msg" (create
 * it, write data, then run STEPS: "|"-separated "suspend", "resume" or a target
 * message). TARGET on the command line, when given, replaces the file's TARGET
 * column (so one file serves ours and stock). PARAMS "<empty>" stands for no
 * parameters at all. Lines starting with '#' are skipped.
 *
 * For each case: DM_DEV_CREATE, DM_TABLE_LOAD, resume, recording the errno of the
 * first failure. When the table is live: write a pattern with O_DIRECT through
 * /dev/dm-N, read it back and compare; hash the ciphertext on the backing device
 * (so two targets can be compared); read the table back (DM_TABLE_STATUS with
 * DM_STATUS_TABLE_FLAG), load that line again (the target's constructor parses
 * it) and read the loaded, inactive table back (DM_QUERY_INACTIVE_TABLE_FLAG): the
 * canonical form must be a fixed point. (Swapping it in costs a suspend and a
 * resume, two RCU grace periods, per case: too slow under TCG.) For a
 * msg case the steps run after the write, each errno recorded, then the data is
 * read when the device is live. The device is always removed. The kernel log
 * (/dev/kmsg, non-blocking) is read from where it was before the case, so a
 * refusal without a message shows.
 *
 * Removal runs on REMOVERS threads while the next cases go on: removing a device
 * that had a table waits for grace periods and queue teardown (about 0.15 s a
 * device under TCG, 0.4 s on the debug kernel: more than half of a case), and it
 * logs nothing, so the case's kernel log is read before the device is handed
 * over. A case's line is printed once its device is gone, so lines come out of
 * order; ms is the case's time without the removal. The removals of earlier cases
 * overlapping the next case's ioctls are a concurrency test of their own.
 *
 * Output, one line per case (key=value, space separated; text values last):
 *   CASE id=.. kind=.. target=.. op=.. load=OK|ERRNO stage=.. logged=0|1
 *        data=ok|bad|-|ERRNO reread=same|diff|-|ERRNO data2=.. ct=HASH|- tab=HASH|-
 *        steps=E1,E2,.. final=live|suspended|- warn=0|1 removed=1|0 ms=ELAPSED msg="..."
 * and at the end "DMFUZZ-DONE cases=N PHASE_ms=.." (the time spent in each phase,
 * summed; removal summed over its threads). Exit status 0 unless the control device
 * or the case file cannot be opened (a failed case is a result, not an error).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <linux/dm-ioctl.h>
#include <linux/fs.h>
#include <linux/keyctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define BUF_SIZE (512 * 1024)	/* ioctl buffer; the generator keeps lines far below */
#define IO_MAX (128 * 1024)	/* bytes written and read back per case */
#define IO_ALIGN 65536		/* the largest sector size any rig kernel allows */
#define REMOVERS 4		/* removal threads */
#define RM_QUEUE 16		/* cases waiting for their device's removal */
#define MSG_MAX 160		/* kernel message text kept for the output line */
#define MAX_STEPS 16

static int ctl = -1;
static int kmsg = -1;
static __thread char *iobuf;	/* the ioctl buffer (one per thread) */
static unsigned char *wbuf, *rbuf;
static char canon[BUF_SIZE];	/* the table read back */

/* where the time goes, summed over all cases (printed with DMFUZZ-DONE) */
enum { PH_CREATE, PH_LOAD, PH_RESUME, PH_DATA, PH_TABLE, PH_STEPS, PH_REMOVE, PH_N };
static const char *const ph_name[PH_N] = {
	"create", "load", "resume", "data", "table", "steps", "remove"
};
static long ph_ms[PH_N];
static struct timespec ph_t;

/* phase_end P: charge the time since the last phase_end to phase P */
static void phase_end(int p)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	ph_ms[p] += (t.tv_sec - ph_t.tv_sec) * 1000 + (t.tv_nsec - ph_t.tv_nsec) / 1000000;
	ph_t = t;
}
static char devname_cur[DM_NAME_LEN];

struct result {
	char load[24], stage[16], data[24], reread[24], data2[24];
	char ct[24], tab[24], steps[MAX_STEPS * 12], final_state[16];
	char msg[MSG_MAX];
	int logged, warn, removed;
};

static const char *ename(int e)
{
	static __thread char other[16];

	switch (e) {
	case 0: return "OK";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case ENXIO: return "ENXIO";
	case ENODEV: return "ENODEV";
	case ENOENT: return "ENOENT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case EAGAIN: return "EAGAIN";
	case EIO: return "EIO";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EKEYREJECTED: return "EKEYREJECTED";
	case ENOKEY: return "ENOKEY";
	case EKEYREVOKED: return "EKEYREVOKED";
	case EKEYEXPIRED: return "EKEYEXPIRED";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOTTY: return "ENOTTY";
	case E2BIG: return "E2BIG";
	case ERANGE: return "ERANGE";
	case EOVERFLOW: return "EOVERFLOW";
	case ENOSPC: return "ENOSPC";
	case ENOTBLK: return "ENOTBLK";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case ENOPKG: return "ENOPKG";
	default:
		snprintf(other, sizeof(other), "E%d", e);
		return other;
	}
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *c = p;

	while (n--) {
		h ^= *c++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* dm_init: a fresh request for device NAME in the ioctl buffer */
static struct dm_ioctl *dm_init(const char *name, uint32_t flags)
{
	struct dm_ioctl *dmi = (struct dm_ioctl *)iobuf;

	memset(iobuf, 0, sizeof(*dmi) + 4096);
	dmi->version[0] = DM_VERSION_MAJOR;
	dmi->version[1] = 0;
	dmi->version[2] = 0;
	dmi->data_size = BUF_SIZE;
	dmi->data_start = sizeof(*dmi);
	dmi->flags = flags;
	if (name)
		snprintf(dmi->name, sizeof(dmi->name), "%s", name);
	return dmi;
}

/* dm_call: the ioctl; 0 or the errno */
static int dm_call(unsigned long cmd, struct dm_ioctl *dmi)
{
	if (ioctl(ctl, cmd, dmi) < 0)
		return errno ? errno : EIO;
	return 0;
}

static int dm_load(const char *name, uint64_t len, const char *target, const char *params)
{
	struct dm_ioctl *dmi = dm_init(name, 0);
	struct dm_target_spec *sp;
	size_t plen = strlen(params);

	if (sizeof(*dmi) + sizeof(*sp) + plen + 1 > BUF_SIZE)
		return E2BIG;
	sp = (struct dm_target_spec *)(iobuf + dmi->data_start);
	memset(sp, 0, sizeof(*sp));
	sp->sector_start = 0;
	sp->length = len;
	snprintf(sp->target_type, sizeof(sp->target_type), "%s", target);
	memcpy(sp + 1, params, plen + 1);
	sp->next = 0;
	dmi->target_count = 1;
	return dm_call(DM_TABLE_LOAD, dmi);
}

/* dm_suspend NAME SUSPEND: suspend (1) or resume (0); the device's dev_t in *dev */
static int dm_suspend(const char *name, int suspend, dev_t *dev)
{
	struct dm_ioctl *dmi = dm_init(name, suspend ? DM_SUSPEND_FLAG : 0);
	int r = dm_call(DM_DEV_SUSPEND, dmi);

	if (!r && dev)
		*dev = (dev_t)dmi->dev;
	return r;
}

/* dm_table_flags NAME: a table's params in canon (one target expected); errno */
static int dm_table_flags(const char *name, uint64_t *len, char *type, uint32_t flags)
{
	struct dm_ioctl *dmi = dm_init(name, DM_STATUS_TABLE_FLAG | flags);
	struct dm_target_spec *sp;
	int r = dm_call(DM_TABLE_STATUS, dmi);

	if (r)
		return r;
	if (dmi->flags & DM_BUFFER_FULL_FLAG)
		return E2BIG;
	if (dmi->target_count != 1)
		return ENOENT;
	sp = (struct dm_target_spec *)(iobuf + dmi->data_start);
	*len = sp->length;
	snprintf(type, DM_MAX_TYPE_NAME, "%s", sp->target_type);
	snprintf(canon, sizeof(canon), "%s", (char *)(sp + 1));
	return 0;
}

/* dm_table NAME: the live table; dm_table_inactive: the one loaded, not yet live */
static int dm_table(const char *name, uint64_t *len, char *type)
{
	return dm_table_flags(name, len, type, 0);
}

static int dm_table_inactive(const char *name, uint64_t *len, char *type)
{
	return dm_table_flags(name, len, type, DM_QUERY_INACTIVE_TABLE_FLAG);
}

static int dm_message(const char *name, const char *msg)
{
	struct dm_ioctl *dmi = dm_init(name, 0);
	struct dm_target_msg *m = (struct dm_target_msg *)(iobuf + dmi->data_start);
	size_t n = strlen(msg);

	if (sizeof(*dmi) + sizeof(*m) + n + 1 > BUF_SIZE)
		return E2BIG;
	m->sector = 0;
	memcpy(m->message, msg, n + 1);
	return dm_call(DM_TARGET_MSG, dmi);
}

/* dm_remove NAME: remove the device, retrying while it is busy; 1 when gone */
static int dm_remove(const char *name)
{
	int i, r;

	for (i = 0; i < 50; i++) {
		r = dm_call(DM_DEV_REMOVE, dm_init(name, 0));
		if (!r || r == ENXIO)
			return 1;
		if (r != EBUSY)
			break;
		usleep(20000);
	}
	/* a suspended device with I/O queued cannot go: resume first, then retry */
	dm_suspend(name, 0, NULL);
	r = dm_call(DM_DEV_REMOVE, dm_init(name, 0));
	return !r || r == ENXIO;
}

/* kmsg_mark: skip to the end of the kernel log */
static void kmsg_mark(void)
{
	if (kmsg >= 0)
		lseek(kmsg, 0, SEEK_END);
}

/* kmsg_collect: read what the kernel logged since kmsg_mark; note device-mapper
 * messages (other than dm-ioctl's generic "error adding target") and warnings */
static void kmsg_collect(struct result *res)
{
	char rec[8192];
	ssize_t n;

	if (kmsg < 0)
		return;
	for (;;) {
		char *text, *p;

		n = read(kmsg, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records: go on with the next */
		if (n <= 0)
			break;
		rec[n] = '\0';
		text = strchr(rec, ';');
		text = text ? text + 1 : rec;
		p = strchr(text, '\n');
		if (p)
			*p = '\0';
		if (strstr(text, "WARNING:") || strstr(text, "BUG:") || strstr(text, "Call trace") ||
		    strstr(text, "Call Trace") || strstr(text, "KASAN") || strstr(text, "lockdep"))
			res->warn = 1;
		if (strncmp(text, "device-mapper:", 14) == 0 &&
		    !strstr(text, "error adding target to table")) {
			res->logged = 1;
			if (!res->msg[0] || strstr(text, "table:")) {
				size_t i;

				snprintf(res->msg, sizeof(res->msg), "%s", text + 15);
				for (i = 0; res->msg[i]; i++)
					if (res->msg[i] == '"' || res->msg[i] < ' ' || res->msg[i] > '~')
						res->msg[i] = '\'';
			}
		}
	}
}

static void fill_pattern(unsigned char *b, size_t n, uint64_t seed)
{
	size_t i;
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;

	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)x;
	}
}

/* io_size DEV: how many bytes to test: four logical blocks, at most IO_MAX */
static size_t io_size(int fd)
{
	uint64_t size = 0;
	int lbs = 512;

	if (ioctl(fd, BLKGETSIZE64, &size) < 0 || ioctl(fd, BLKSSZGET, &lbs) < 0 || lbs <= 0)
		return 0;
	/* a few sectors: four of the device's, at most IO_MAX (encryption is slow under TCG) */
	if (size > 4 * (uint64_t)lbs)
		size = 4 * (uint64_t)lbs;
	if (size > IO_MAX)
		size = IO_MAX;
	return (size_t)(size - size % (uint64_t)lbs);
}

/* dev_open: the block device DEV: /dev/dm-MINOR (devtmpfs) when that node is DEV,
 * else a node made for the purpose (the backing device, or no devtmpfs node) */
static int dev_open(dev_t dev, int flags)
{
	char path[64];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/dev/dm-%u", minor(dev));
	if (stat(path, &st) == 0 && S_ISBLK(st.st_mode) && st.st_rdev == dev)
		return open(path, flags);
	snprintf(path, sizeof(path), "/dev/fz-node-%u-%u", major(dev), minor(dev));
	unlink(path);
	if (mknod(path, S_IFBLK | 0600, dev) < 0)
		return -1;
	fd = open(path, flags);
	unlink(path);
	return fd;
}

/* write_data: write the case's pattern; errno, or 0 with *n set (0 when untestable) */
static int write_data(dev_t dev, uint64_t seed, size_t *n)
{
	int fd = dev_open(dev, O_RDWR | O_DIRECT), r = 0;

	*n = 0;
	if (fd < 0)
		return errno;
	*n = io_size(fd);
	if (*n) {
		fill_pattern(wbuf, *n, seed);
		if (pwrite(fd, wbuf, *n, 0) != (ssize_t)*n)
			r = errno ? errno : EIO;
	}
	close(fd);
	return r;
}

/* check_data: read back and compare; into out: ok, bad or the errno */
static void check_data(dev_t dev, size_t n, char *out, size_t outsz)
{
	int fd = dev_open(dev, O_RDONLY | O_DIRECT);
	ssize_t got;

	if (fd < 0) {
		snprintf(out, outsz, "%s", ename(errno));
		return;
	}
	memset(rbuf, 0xa5, n);
	got = pread(fd, rbuf, n, 0);
	if (got != (ssize_t)n)
		snprintf(out, outsz, "%s", got < 0 ? ename(errno) : "short");
	else
		snprintf(out, outsz, "%s", memcmp(rbuf, wbuf, n) ? "bad" : "ok");
	close(fd);
}

/* ciphertext: hash n bytes of the backing device at the table's offset (field 5) */
static void ciphertext(size_t n, char *out, size_t outsz)
{
	char dev[64];
	unsigned long long off;
	unsigned int ma, mi;
	int fd;
	ssize_t got;

	snprintf(out, outsz, "-");
	if (sscanf(canon, "%*s %*s %*s %63s %llu", dev, &off) != 2 ||
	    sscanf(dev, "%u:%u", &ma, &mi) != 2)
		return;
	fd = dev_open(makedev(ma, mi), O_RDONLY | O_DIRECT);
	if (fd < 0)
		return;
	got = pread(fd, rbuf, n, (off_t)(off * 512));
	if (got == (ssize_t)n)
		snprintf(out, outsz, "%016" PRIx64, fnv(rbuf, n, 0xcbf29ce484222325ULL));
	close(fd);
}

static void run_steps(const char *name, char *steps, struct result *res, int *live)
{
	char *save = NULL, *s;
	size_t used = 0;

	for (s = strtok_r(steps, "|", &save); s; s = strtok_r(NULL, "|", &save)) {
		int r;

		if (strcmp(s, "suspend") == 0) {
			r = dm_suspend(name, 1, NULL);
			if (!r)
				*live = 0;
		} else if (strcmp(s, "resume") == 0) {
			r = dm_suspend(name, 0, NULL);
			if (!r)
				*live = 1;
		} else {
			r = dm_message(name, s);
		}
		used += (size_t)snprintf(res->steps + used, sizeof(res->steps) - used, "%s%s",
					 used ? "," : "", ename(r));
		if (used >= sizeof(res->steps))
			break;
	}
}

/* a case waiting for its device's removal: its line is head "removed=N" tail */
struct rm_job {
	char name[DM_NAME_LEN];
	char *head, *tail;
};

static struct rm_job rm_q[RM_QUEUE];
static int rm_first, rm_count, rm_closed;
static pthread_mutex_t rm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rm_more = PTHREAD_COND_INITIALIZER;
static pthread_cond_t rm_room = PTHREAD_COND_INITIALIZER;

static void remove_later(struct rm_job *job, const char *name)
{
	snprintf(job->name, sizeof(job->name), "%s", name);
}

/* rm_push: queue a job, waiting while RM_QUEUE cases wait already */
static void rm_push(const struct rm_job *job)
{
	pthread_mutex_lock(&rm_lock);
	while (rm_count == RM_QUEUE)
		pthread_cond_wait(&rm_room, &rm_lock);
	rm_q[(rm_first + rm_count) % RM_QUEUE] = *job;
	rm_count++;
	pthread_cond_signal(&rm_more);
	pthread_mutex_unlock(&rm_lock);
}

/* remover: remove queued devices and print their cases until rm_closed and empty */
static void *remover(void *unused)
{
	struct rm_job job;
	struct timespec t0, t1;
	int removed;

	(void)unused;
	iobuf = aligned_alloc(8, BUF_SIZE);
	if (!iobuf) {
		fprintf(stderr, "dmfuzz: out of memory\n");
		exit(1);
	}
	for (;;) {
		pthread_mutex_lock(&rm_lock);
		while (!rm_count && !rm_closed)
			pthread_cond_wait(&rm_more, &rm_lock);
		if (!rm_count) {
			pthread_mutex_unlock(&rm_lock);
			break;
		}
		job = rm_q[rm_first];
		rm_first = (rm_first + 1) % RM_QUEUE;
		rm_count--;
		pthread_cond_signal(&rm_room);
		pthread_mutex_unlock(&rm_lock);

		clock_gettime(CLOCK_MONOTONIC, &t0);
		removed = dm_remove(job.name);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		__atomic_add_fetch(&ph_ms[PH_REMOVE], (t1.tv_sec - t0.tv_sec) * 1000 +
				   (t1.tv_nsec - t0.tv_nsec) / 1000000, __ATOMIC_RELAXED);
		printf("%sremoved=%d%s\n", job.head, removed, job.tail);	/* one locked call */
		free(job.head);
		free(job.tail);
	}
	free(iobuf);
	return NULL;
}

static void run_case(const char *id, const char *kind, const char *target, const char *op,
		     const char *lenstr, const char *params, char *steps)
{
	struct result res;
	struct rm_job job;
	uint64_t len, len2, seed;
	char type2[DM_MAX_TYPE_NAME];
	dev_t dev = 0;
	size_t n = 0;
	int r, live = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&res, 0, sizeof(res));
	strcpy(res.load, "-");
	strcpy(res.stage, "-");
	strcpy(res.data, "-");
	strcpy(res.reread, "-");
	strcpy(res.data2, "-");
	strcpy(res.ct, "-");
	strcpy(res.tab, "-");
	strcpy(res.final_state, "-");
	seed = fnv(id, strlen(id), 0xcbf29ce484222325ULL);
	len = strtoull(lenstr, NULL, 10);
	snprintf(devname_cur, sizeof(devname_cur), "fz-%s", id);

	kmsg_mark();
	ph_t = t0;
	r = dm_call(DM_DEV_CREATE, dm_init(devname_cur, 0));
	phase_end(PH_CREATE);
	if (r) {
		strcpy(res.stage, "create");
		goto out;
	}
	r = dm_load(devname_cur, len, target, params);
	phase_end(PH_LOAD);
	if (r) {
		strcpy(res.stage, "load");
		goto out;
	}
	r = dm_suspend(devname_cur, 0, &dev);
	phase_end(PH_RESUME);
	if (r) {
		strcpy(res.stage, "resume");
		goto out;
	}
	live = 1;
	r = write_data(dev, seed, &n);
	if (r) {
		snprintf(res.data, sizeof(res.data), "w%s", ename(r));
		n = 0;
	} else if (n) {
		check_data(dev, n, res.data, sizeof(res.data));
	}
	phase_end(PH_DATA);
	r = dm_table(devname_cur, &len2, type2);
	if (r) {
		snprintf(res.reread, sizeof(res.reread), "%s", ename(r));
	} else {
		static char first[BUF_SIZE];
		uint64_t h = fnv(canon, strlen(canon), 0xcbf29ce484222325ULL);

		snprintf(res.tab, sizeof(res.tab), "%016" PRIx64, h);
		if (n)
			ciphertext(n, res.ct, sizeof(res.ct));
		if (strcmp(op, "table") == 0) {
			snprintf(first, sizeof(first), "%s", canon);
			r = dm_load(devname_cur, len2, type2, first);
			if (!r)
				r = dm_table_inactive(devname_cur, &len2, type2);
			if (r)
				snprintf(res.reread, sizeof(res.reread), "%s", ename(r));
			else
				snprintf(res.reread, sizeof(res.reread), "%s",
					 strcmp(first, canon) || strcmp(type2, target) ? "diff" : "same");
		}
	}
	phase_end(PH_TABLE);
	r = 0;
	if (strcmp(op, "msg") == 0 && steps) {
		run_steps(devname_cur, steps, &res, &live);
		snprintf(res.final_state, sizeof(res.final_state), "%s", live ? "live" : "suspended");
		if (live && n)
			check_data(dev, n, res.data2, sizeof(res.data2));
		phase_end(PH_STEPS);
	}
out:
	snprintf(res.load, sizeof(res.load), "%s", res.stage[0] == '-' ? "OK" : ename(r));
	phase_end(PH_STEPS);
	kmsg_collect(&res);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	remove_later(&job, devname_cur);
	if (asprintf(&job.head, "CASE id=%s kind=%s target=%s op=%s load=%s stage=%s logged=%d "
		     "data=%s reread=%s data2=%s ct=%s tab=%s steps=%s final=%s warn=%d ",
		     id, kind, target, op, res.load, res.stage, res.logged, res.data, res.reread,
		     res.data2, res.ct, res.tab, res.steps[0] ? res.steps : "-", res.final_state,
		     res.warn) < 0 ||
	    asprintf(&job.tail, " ms=%ld msg=\"%s\"",
		     (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000),
		     res.msg) < 0) {
		fprintf(stderr, "dmfuzz: out of memory\n");
		exit(1);
	}
	rm_push(&job);
}

/* add_keys: the keyring keys the generator's tables name (logon and user, in @u) */
static void add_keys(void)
{
	static const int sizes[] = { 16, 32, 64 };
	unsigned char key[64];
	char desc[32];
	size_t i, j;

	for (j = 0; j < sizeof(key); j++)
		key[j] = (unsigned char)j;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(desc, sizeof(desc), "fz:k%d", sizes[i]);
		if (syscall(SYS_add_key, "logon", desc, key, (size_t)sizes[i],
			    KEY_SPEC_USER_KEYRING) < 0)
			fprintf(stderr, "dmfuzz: add_key logon %s: %s\n", desc, strerror(errno));
		snprintf(desc, sizeof(desc), "fzu:k%d", sizes[i]);
		if (syscall(SYS_add_key, "user", desc, key, (size_t)sizes[i],
			    KEY_SPEC_USER_KEYRING) < 0)
			fprintf(stderr, "dmfuzz: add_key user %s: %s\n", desc, strerror(errno));
	}
}

int main(int argc, char **argv)
{
	static char line[BUF_SIZE];
	pthread_t removers[REMOVERS];
	FILE *f;
	long cases = 0;
	int i;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: dmfuzz CASES [TARGET]\n");
		return 2;
	}
	f = fopen(argv[1], "r");
	if (!f) {
		fprintf(stderr, "dmfuzz: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	ctl = open("/dev/mapper/control", O_RDWR);
	if (ctl < 0) {
		fprintf(stderr, "dmfuzz: /dev/mapper/control: %s\n", strerror(errno));
		return 1;
	}
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg < 0)
		fprintf(stderr, "dmfuzz: /dev/kmsg: %s (messages will not be checked)\n",
			strerror(errno));
	iobuf = aligned_alloc(8, BUF_SIZE);
	if (!iobuf || posix_memalign((void **)&wbuf, IO_ALIGN, IO_MAX) ||
	    posix_memalign((void **)&rbuf, IO_ALIGN, IO_MAX)) {
		fprintf(stderr, "dmfuzz: out of memory\n");
		return 1;
	}
	add_keys();
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < REMOVERS; i++)
		if (pthread_create(&removers[i], NULL, remover, NULL)) {
			fprintf(stderr, "dmfuzz: cannot start a removal thread\n");
			return 1;
		}
	while (fgets(line, sizeof(line), f)) {
		char *field[8] = { 0 }, *save = NULL, *p;
		int nf = 0;

		p = strchr(line, '\n');
		if (p)
			*p = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		for (p = strtok_r(line, "\t", &save); p && nf < 8; p = strtok_r(NULL, "\t", &save))
			field[nf++] = p;
		if (nf < 7) {
			printf("CASE id=%s kind=malformed-case-line load=- msg=\"%d fields\"\n",
			       field[0] ? field[0] : "?", nf);
			continue;
		}
		/* field: 0 id, 1 kind, 2 target, 3 flags, 4 op, 5 length, 6 params, 7 steps */
		run_case(field[0], field[1], argc == 3 ? argv[2] : field[2], field[4], field[5],
			 strcmp(field[6], "<empty>") ? field[6] : "", field[7]);
		cases++;
	}
	fclose(f);
	pthread_mutex_lock(&rm_lock);
	rm_closed = 1;
	pthread_cond_broadcast(&rm_more);
	pthread_mutex_unlock(&rm_lock);
	for (i = 0; i < REMOVERS; i++)
		pthread_join(removers[i], NULL);
	printf("DMFUZZ-DONE cases=%ld", cases);
	for (i = 0; i < PH_N; i++)
		printf(" %s_ms=%ld", ph_name[i], ph_ms[i]);
	printf("\n");
	return 0;
}
