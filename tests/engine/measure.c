// SPDX-License-Identifier: GPL-2.0-only
/*
 * lbs-engine: the engine's window for tests and benchmarks,
 * /sys/kernel/lbs_engine/:
 *
 * stats    what the engine counted (one "name value" a line).
 * measure  write "cipher|engine encrypt|decrypt SIZE MILLISECONDS": drive the
 *          synchronous software xts(aes) (the fallback, t(S)) or the engine
 *          itself (enough requests in flight to keep every channel busy)
 *          with SIZE-byte requests for that long; read back
 *          "WHAT OP SIZE BYTES NANOSECONDS REQUESTS DRIVER".
 *          write "queue": the queue discipline with the engine idle and
 *          latency_us long enough that nothing completes meanwhile:
 *          queue_depth requests without MAY_BACKLOG, one more without it,
 *          one with it; read back what each returned and how each ended.
 */

#include <linux/gfp.h>
#include <linux/kobject.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <crypto/aes.h>
#include <crypto/skcipher.h>

#include "lbs-engine.h"

#define LBS_MEASURE_MAX_MS	60000
#define LBS_MEASURE_KEY_BYTES	(2 * AES_MAX_KEY_SIZE)
#define LBS_MEASURE_LINE	192

static struct kobject *lbs_engine_kobj;
static DEFINE_MUTEX(lbs_measure_lock);	/* one measurement at a time */
static char lbs_measure_result[LBS_MEASURE_LINE] = "none\n";

/* One request of a measurement: its buffer, IV, and how it ended. */
struct lbs_slot {
	struct skcipher_request *req;
	struct page *pages;
	struct scatterlist sg;
	struct crypto_wait wait;
	u8 iv[AES_BLOCK_SIZE];
	int ret;		/* what encrypt/decrypt returned */
	int notified;		/* -EINPROGRESS callbacks seen (queue check) */
	int err;		/* the final status (queue check) */
	bool done;
};

struct lbs_run {
	struct crypto_skcipher *tfm;
	struct lbs_slot *slots;
	unsigned int nslots;
	unsigned int size;
	bool encrypt;
};

static void lbs_run_free(struct lbs_run *run)
{
	unsigned int i;

	for (i = 0; run->slots && i < run->nslots; i++) {
		skcipher_request_free(run->slots[i].req);
		if (run->slots[i].pages)
			__free_pages(run->slots[i].pages, get_order(run->size));
	}
	kfree(run->slots);
	if (!IS_ERR_OR_NULL(run->tfm))
		crypto_free_skcipher(run->tfm);
}

/* A keyed transform and NSLOTS requests of SIZE bytes each, in place. */
static int lbs_run_alloc(struct lbs_run *run, const char *name, u32 mask,
			 unsigned int nslots)
{
	u8 key[LBS_MEASURE_KEY_BYTES];
	unsigned int i;
	int ret;

	run->tfm = crypto_alloc_skcipher(name, 0, mask);
	if (IS_ERR(run->tfm))
		return PTR_ERR(run->tfm);
	get_random_bytes(key, sizeof(key));
	ret = crypto_skcipher_setkey(run->tfm, key, sizeof(key));
	memzero_explicit(key, sizeof(key));
	if (ret)
		return ret;
	run->slots = kcalloc(nslots, sizeof(*run->slots), GFP_KERNEL);
	if (!run->slots)
		return -ENOMEM;
	run->nslots = nslots;
	for (i = 0; i < nslots; i++) {
		struct lbs_slot *s = &run->slots[i];

		s->req = skcipher_request_alloc(run->tfm, GFP_KERNEL);
		s->pages = alloc_pages(GFP_KERNEL | __GFP_ZERO, get_order(run->size));
		if (!s->req || !s->pages)
			return -ENOMEM;
		sg_init_one(&s->sg, page_address(s->pages), run->size);
		s->iv[0] = i;
		crypto_init_wait(&s->wait);
	}
	return 0;
}

static int lbs_slot_start(struct lbs_run *run, struct lbs_slot *s, u32 flags,
			  crypto_completion_t done, void *data)
{
	skcipher_request_set_callback(s->req, flags, done, data);
	skcipher_request_set_crypt(s->req, &s->sg, &s->sg, run->size, s->iv);
	return run->encrypt ? crypto_skcipher_encrypt(s->req) :
			      crypto_skcipher_decrypt(s->req);
}

/*
 * Keep every slot busy until MS milliseconds have passed, then wait for
 * what is in flight; the time ends with the last completion.  The slots
 * are served in turn, which is the order an engine with equal latency
 * completes them in.
 */
static int lbs_run_drive(struct lbs_run *run, unsigned int ms, u64 *bytes,
			 u64 *ns, u64 *requests)
{
	const u32 flags = CRYPTO_TFM_REQ_MAY_BACKLOG | CRYPTO_TFM_REQ_MAY_SLEEP;
	ktime_t start = ktime_get(), deadline = ktime_add_ms(start, ms);
	unsigned int i, busy = 0;
	bool stopping = false;
	int err = 0, ret;

	for (i = 0; i < run->nslots; i++) {
		struct lbs_slot *s = &run->slots[i];

		s->ret = lbs_slot_start(run, s, flags, crypto_req_done, &s->wait);
		busy++;
	}
	*bytes = 0;
	*requests = 0;
	for (i = 0; busy; i = (i + 1) % run->nslots) {
		struct lbs_slot *s = &run->slots[i];

		if (s->done)
			continue;
		ret = crypto_wait_req(s->ret, &s->wait);
		if (ret && !err)
			err = ret;
		*bytes += run->size;
		(*requests)++;
		if (err || ktime_after(ktime_get(), deadline))
			stopping = true;
		if (stopping) {
			s->done = true;
			busy--;
			continue;
		}
		crypto_init_wait(&s->wait);
		s->ret = lbs_slot_start(run, s, flags, crypto_req_done, &s->wait);
	}
	*ns = ktime_to_ns(ktime_sub(ktime_get(), start));
	return err;
}

static int lbs_measure(bool engine, bool encrypt, unsigned int size,
		       unsigned int ms)
{
	struct lbs_run run = { .size = size, .encrypt = encrypt };
	unsigned int nslots = 1;
	u64 bytes, ns, requests;
	int ret;

	/* Twice the channels in flight: a channel never waits for work. */
	if (engine)
		nslots = min(lbs_engine_queue_depth, 2 * lbs_engine_channels);
	ret = lbs_run_alloc(&run, engine ? LBS_ENGINE_DRIVER : LBS_ENGINE_ALG,
			    engine ? 0 : CRYPTO_ALG_ASYNC, nslots);
	if (!ret)
		ret = lbs_run_drive(&run, ms, &bytes, &ns, &requests);
	if (!ret)
		scnprintf(lbs_measure_result, sizeof(lbs_measure_result),
			  "%s %s %u %llu %llu %llu %s\n",
			  engine ? "engine" : "cipher",
			  encrypt ? "encrypt" : "decrypt", size, bytes, ns,
			  requests, crypto_skcipher_driver_name(run.tfm));
	lbs_run_free(&run);
	return ret;
}

/* The queue check's callback: counts "in progress" notes, records the end. */
static void lbs_queue_done(LBS_ENGINE_DONE_ARG arg, int err)
{
	struct lbs_slot *s = lbs_engine_done_data(arg);

	if (err == -EINPROGRESS) {
		s->notified++;
		return;
	}
	s->err = err;
	complete(&s->wait.completion);
}

static int lbs_queue_check(void)
{
	unsigned int depth = lbs_engine_queue_depth, n = depth + 2, i;
	struct lbs_run run = { .size = 4096, .encrypt = true };
	unsigned int inprogress = 0, nospc = 0, busy = 0, other = 0;
	unsigned int notified = 0, done = 0, errors = 0;
	int ret;

	ret = lbs_run_alloc(&run, LBS_ENGINE_DRIVER, 0, n);
	if (ret)
		goto out;
	for (i = 0; i < n; i++) {
		struct lbs_slot *s = &run.slots[i];
		u32 flags = i == n - 1 ? CRYPTO_TFM_REQ_MAY_BACKLOG : 0;

		s->ret = lbs_slot_start(&run, s, flags, lbs_queue_done, s);
		if (i < depth && s->ret == -EINPROGRESS)
			inprogress++;
		else if (i == depth && s->ret == -ENOSPC)
			nospc++;
		else if (i == n - 1 && s->ret == -EBUSY)
			busy++;
		else
			other++;
	}
	for (i = 0; i < n; i++) {
		struct lbs_slot *s = &run.slots[i];

		if (s->ret != -EINPROGRESS && s->ret != -EBUSY)
			continue;
		wait_for_completion(&s->wait.completion);
		notified += s->notified;
		done++;
		if (s->err)
			errors++;
	}
	scnprintf(lbs_measure_result, sizeof(lbs_measure_result),
		  "queue depth=%u inprogress=%u nospc=%u busy=%u other=%u notified=%u done=%u errors=%u\n",
		  depth, inprogress, nospc, busy, other, notified, done, errors);
out:
	lbs_run_free(&run);
	return ret;
}

static ssize_t measure_store(struct kobject *kobj, struct kobj_attribute *attr,
			     const char *buf, size_t count)
{
	char what[8], op[8];
	unsigned int size, ms;
	bool engine, encrypt;
	int ret;

	if (sysfs_streq(buf, "queue")) {
		mutex_lock(&lbs_measure_lock);
		ret = lbs_queue_check();
		mutex_unlock(&lbs_measure_lock);
		return ret ? ret : count;
	}
	if (sscanf(buf, "%7s %7s %u %u", what, op, &size, &ms) != 4)
		return -EINVAL;
	if (strcmp(what, "cipher") && strcmp(what, "engine"))
		return -EINVAL;
	if (strcmp(op, "encrypt") && strcmp(op, "decrypt"))
		return -EINVAL;
	/* Whole AES blocks, at most what one allocation gives (128 KiB). */
	if (size < AES_BLOCK_SIZE || size % AES_BLOCK_SIZE || size > (128 << 10))
		return -EINVAL;
	if (!ms || ms > LBS_MEASURE_MAX_MS)
		return -EINVAL;
	engine = !strcmp(what, "engine");
	encrypt = !strcmp(op, "encrypt");
	mutex_lock(&lbs_measure_lock);
	ret = lbs_measure(engine, encrypt, size, ms);
	mutex_unlock(&lbs_measure_lock);
	return ret ? ret : count;
}

static ssize_t measure_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	ssize_t len;

	mutex_lock(&lbs_measure_lock);
	len = sysfs_emit(buf, "%s", lbs_measure_result);
	mutex_unlock(&lbs_measure_lock);
	return len;
}

static ssize_t stats_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	struct lbs_engine_stats st;

	lbs_engine_read_stats(&st);
	return sysfs_emit(buf,
			  "submitted %llu\nbacklogged %llu\nrejected %llu\ncompleted %llu\ninjected %llu\nbytes %llu\npeak %u\nbacklog_peak %u\n",
			  st.submitted, st.backlogged, st.rejected, st.completed,
			  st.injected, st.bytes, st.peak, st.backlog_peak);
}

static struct kobj_attribute lbs_measure_attr = __ATTR_RW_MODE(measure, 0600);
static struct kobj_attribute lbs_stats_attr = __ATTR_RO(stats);

static struct attribute *lbs_engine_attrs[] = {
	&lbs_measure_attr.attr,
	&lbs_stats_attr.attr,
	NULL,
};

static const struct attribute_group lbs_engine_group = {
	.attrs = lbs_engine_attrs,
};

int lbs_engine_sysfs_init(void)
{
	int ret;

	lbs_engine_kobj = kobject_create_and_add("lbs_engine", kernel_kobj);
	if (!lbs_engine_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(lbs_engine_kobj, &lbs_engine_group);
	if (ret) {
		kobject_put(lbs_engine_kobj);
		lbs_engine_kobj = NULL;
	}
	return ret;
}

void lbs_engine_sysfs_exit(void)
{
	kobject_put(lbs_engine_kobj);
	lbs_engine_kobj = NULL;
}
