// SPDX-License-Identifier: GPL-2.0-only
/*
 * lbs-engine: the emulated offload engine.  An asynchronous xts(aes) under
 * the driver name lbs-engine-xts-aes, reached as capi:lbs-engine-xts-aes-plain64.
 *
 * A request is accepted into a hardware queue of queue_depth entries (a
 * request counts from acceptance to completion), or, when the queue is
 * full, backlogged (-EBUSY, CRYPTO_TFM_REQ_MAY_BACKLOG) or refused
 * (-ENOSPC).  One of the channels (kernel threads) takes it, sleeps
 * latency_us (the DMA round trip: time, no CPU), runs the real AES-XTS
 * through a synchronous software fallback and completes the request with
 * bottom halves disabled, as a driver's tasklet would.  A completion makes
 * room for the oldest backlogged request, which is told -EINPROGRESS first.
 */

#include <linux/bottom_half.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <crypto/aes.h>
#include <crypto/internal/skcipher.h>

#include "lbs-engine.h"

/*
 * The default latency: the model's bound is channels * S / (latency + t(S)),
 * so bound(65536) >= 10 * bound(4096) holds while latency >= 98304 / R
 * seconds, R the fallback's rate in bytes per second.  20 ms holds it down
 * to R = 4.9 MB/s; the rig's guests measure 10-11 MB/s (TCG, loaded host).
 * See Documentation/performance.rst.
 */
unsigned int lbs_engine_latency_us = 20000;
module_param_named(latency_us, lbs_engine_latency_us, uint, 0644);
MODULE_PARM_DESC(latency_us, "fixed time each request spends in a channel before its cipher work, in microseconds (default 20000)");

unsigned int lbs_engine_channels = 4;
module_param_named(channels, lbs_engine_channels, uint, 0444);
MODULE_PARM_DESC(channels, "channels (kernel threads) serving the queue, 1-64 (default 4)");

unsigned int lbs_engine_queue_depth = 64;
module_param_named(queue_depth, lbs_engine_queue_depth, uint, 0444);
MODULE_PARM_DESC(queue_depth, "requests the hardware queue holds, waiting and in service, 1-4096 (default 64)");

static unsigned int lbs_engine_error_ppm;
module_param_named(error_rate_ppm, lbs_engine_error_ppm, uint, 0644);
MODULE_PARM_DESC(error_rate_ppm, "share of requests completed with -EIO instead of being processed, per million (default 0)");

static int lbs_engine_refuse_key = -1;
module_param_named(refuse_key_byte, lbs_engine_refuse_key, int, 0644);
MODULE_PARM_DESC(refuse_key_byte, "setkey refuses (-EINVAL) a key whose first byte is this value, as a driver refuses a weak key (default -1: none)");

#define LBS_ENGINE_PPM	1000000

struct lbs_engine lbs_engine;
static struct task_struct *lbs_engine_threads[LBS_ENGINE_MAX_CHANNELS];

struct lbs_engine_tfm {
	struct crypto_skcipher *fallback;
};

struct lbs_engine_req {
	struct list_head node;
	struct skcipher_request *req;
	bool encrypt;
	struct skcipher_request fallback;	/* last: its context follows */
};

void lbs_engine_read_stats(struct lbs_engine_stats *out)
{
	unsigned long flags;

	spin_lock_irqsave(&lbs_engine.lock, flags);
	*out = lbs_engine.stats;
	spin_unlock_irqrestore(&lbs_engine.lock, flags);
}

/* Called with the lock held: one more request in the hardware queue. */
static void lbs_engine_admit(struct lbs_engine_req *rctx, struct list_head *to)
{
	struct lbs_engine *eng = &lbs_engine;

	eng->queued++;
	if (eng->queued > eng->stats.peak)
		eng->stats.peak = eng->queued;
	if (to)
		list_add_tail(&rctx->node, to);
}

static int lbs_engine_submit(struct skcipher_request *req, bool encrypt)
{
	struct lbs_engine_req *rctx = skcipher_request_ctx(req);
	struct lbs_engine *eng = &lbs_engine;
	unsigned long flags;
	int ret;

	if (req->cryptlen < AES_BLOCK_SIZE)
		return -EINVAL;
	rctx->req = req;
	rctx->encrypt = encrypt;

	spin_lock_irqsave(&eng->lock, flags);
	if (eng->queued < lbs_engine_queue_depth && list_empty(&eng->backlog)) {
		lbs_engine_admit(rctx, &eng->pending);
		eng->stats.submitted++;
		ret = -EINPROGRESS;
	} else if (req->base.flags & CRYPTO_TFM_REQ_MAY_BACKLOG) {
		list_add_tail(&rctx->node, &eng->backlog);
		eng->stats.backlogged++;
		if (++eng->backlog_len > eng->stats.backlog_peak)
			eng->stats.backlog_peak = eng->backlog_len;
		ret = -EBUSY;
	} else {
		eng->stats.rejected++;
		ret = -ENOSPC;
	}
	spin_unlock_irqrestore(&eng->lock, flags);

	if (ret == -EINPROGRESS)
		wake_up(&eng->wait);
	return ret;
}

static int lbs_engine_encrypt(struct skcipher_request *req)
{
	return lbs_engine_submit(req, true);
}

static int lbs_engine_decrypt(struct skcipher_request *req)
{
	return lbs_engine_submit(req, false);
}

/*
 * The request left the hardware: complete it and let the oldest backlogged
 * request in.  That one is told -EINPROGRESS before a channel can see it, so
 * its owner always hears "in progress" before "done".
 */
static void lbs_engine_complete(struct lbs_engine_req *rctx, int err,
				bool injected)
{
	struct skcipher_request *req = rctx->req;
	struct lbs_engine *eng = &lbs_engine;
	struct lbs_engine_req *next = NULL;
	unsigned long flags;

	spin_lock_irqsave(&eng->lock, flags);
	eng->queued--;
	if (injected) {
		eng->stats.injected++;
	} else {
		eng->stats.completed++;
		eng->stats.bytes += req->cryptlen;
	}
	if (!list_empty(&eng->backlog)) {
		next = list_first_entry(&eng->backlog, struct lbs_engine_req, node);
		list_del(&next->node);
		eng->backlog_len--;
		lbs_engine_admit(next, NULL);
	}
	spin_unlock_irqrestore(&eng->lock, flags);

	local_bh_disable();
	if (next)
		skcipher_request_complete(next->req, -EINPROGRESS);
	skcipher_request_complete(req, err);
	local_bh_enable();

	if (next) {
		spin_lock_irqsave(&eng->lock, flags);
		list_add_tail(&next->node, &eng->pending);
		spin_unlock_irqrestore(&eng->lock, flags);
		wake_up(&eng->wait);
	}
}

/* One request through a channel: the latency, the cipher, the completion. */
static void lbs_engine_process(struct lbs_engine_req *rctx)
{
	struct skcipher_request *req = rctx->req;
	struct lbs_engine_tfm *ctx = crypto_skcipher_ctx(crypto_skcipher_reqtfm(req));
	struct skcipher_request *sub = &rctx->fallback;
	unsigned int latency = READ_ONCE(lbs_engine_latency_us);
	unsigned int ppm = READ_ONCE(lbs_engine_error_ppm);
	int err;

	if (latency)
		usleep_range(latency, latency + latency / 32 + 1);
	if (ppm && get_random_u32_below(LBS_ENGINE_PPM) < ppm) {
		lbs_engine_complete(rctx, -EIO, true);
		return;
	}
	skcipher_request_set_tfm(sub, ctx->fallback);
	skcipher_request_set_callback(sub, CRYPTO_TFM_REQ_MAY_SLEEP, NULL, NULL);
	skcipher_request_set_crypt(sub, req->src, req->dst, req->cryptlen, req->iv);
	err = rctx->encrypt ? crypto_skcipher_encrypt(sub) :
			      crypto_skcipher_decrypt(sub);
	lbs_engine_complete(rctx, err, false);
}

/* The next request waiting for a channel, taken off the queue, or NULL. */
static struct lbs_engine_req *lbs_engine_take(void)
{
	struct lbs_engine *eng = &lbs_engine;
	struct lbs_engine_req *rctx = NULL;
	unsigned long flags;

	spin_lock_irqsave(&eng->lock, flags);
	if (!list_empty(&eng->pending)) {
		rctx = list_first_entry(&eng->pending, struct lbs_engine_req, node);
		list_del(&rctx->node);
	}
	spin_unlock_irqrestore(&eng->lock, flags);
	return rctx;
}

static bool lbs_engine_has_work(void)
{
	bool work;
	unsigned long flags;

	spin_lock_irqsave(&lbs_engine.lock, flags);
	work = !list_empty(&lbs_engine.pending);
	spin_unlock_irqrestore(&lbs_engine.lock, flags);
	return work;
}

static int lbs_engine_channel(void *unused)
{
	struct lbs_engine_req *rctx;

	while (!kthread_should_stop()) {
		wait_event_idle(lbs_engine.wait,
				lbs_engine_has_work() || kthread_should_stop());
		rctx = lbs_engine_take();
		if (rctx)
			lbs_engine_process(rctx);
		cond_resched();
	}
	return 0;
}

static int lbs_engine_setkey(struct crypto_skcipher *tfm, const u8 *key,
			     unsigned int keylen)
{
	struct lbs_engine_tfm *ctx = crypto_skcipher_ctx(tfm);
	int refuse = READ_ONCE(lbs_engine_refuse_key);

	if (keylen && refuse >= 0 && key[0] == refuse)
		return -EINVAL;
	crypto_skcipher_clear_flags(ctx->fallback, CRYPTO_TFM_REQ_MASK);
	crypto_skcipher_set_flags(ctx->fallback, crypto_skcipher_get_flags(tfm) &
				  CRYPTO_TFM_REQ_MASK);
	return crypto_skcipher_setkey(ctx->fallback, key, keylen);
}

static int lbs_engine_init_tfm(struct crypto_skcipher *tfm)
{
	struct lbs_engine_tfm *ctx = crypto_skcipher_ctx(tfm);
	struct crypto_skcipher *fallback;

	/* Synchronous, and never an implementation that needs a fallback itself. */
	fallback = crypto_alloc_skcipher(LBS_ENGINE_ALG, 0, CRYPTO_ALG_ASYNC |
					 CRYPTO_ALG_NEED_FALLBACK);
	if (IS_ERR(fallback)) {
		pr_err("lbs-engine: no synchronous %s for the fallback: %ld\n",
		       LBS_ENGINE_ALG, PTR_ERR(fallback));
		return PTR_ERR(fallback);
	}
	ctx->fallback = fallback;
	crypto_skcipher_set_reqsize(tfm, sizeof(struct lbs_engine_req) +
				    crypto_skcipher_reqsize(fallback));
	return 0;
}

static void lbs_engine_exit_tfm(struct crypto_skcipher *tfm)
{
	struct lbs_engine_tfm *ctx = crypto_skcipher_ctx(tfm);

	crypto_free_skcipher(ctx->fallback);
}

static struct skcipher_alg lbs_engine_alg = {
	.base.cra_name		= LBS_ENGINE_ALG,
	.base.cra_driver_name	= LBS_ENGINE_DRIVER,
	.base.cra_priority	= LBS_ENGINE_PRIORITY,
	.base.cra_flags		= CRYPTO_ALG_ASYNC | CRYPTO_ALG_NEED_FALLBACK,
	.base.cra_blocksize	= AES_BLOCK_SIZE,
	.base.cra_ctxsize	= sizeof(struct lbs_engine_tfm),
	.base.cra_module	= THIS_MODULE,
	.min_keysize		= 2 * AES_MIN_KEY_SIZE,
	.max_keysize		= 2 * AES_MAX_KEY_SIZE,
	.ivsize			= AES_BLOCK_SIZE,
	.setkey			= lbs_engine_setkey,
	.encrypt		= lbs_engine_encrypt,
	.decrypt		= lbs_engine_decrypt,
	.init			= lbs_engine_init_tfm,
	.exit			= lbs_engine_exit_tfm,
};

static void lbs_engine_stop_channels(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(lbs_engine_threads); i++) {
		if (lbs_engine_threads[i])
			kthread_stop(lbs_engine_threads[i]);
		lbs_engine_threads[i] = NULL;
	}
}

static int __init lbs_engine_init(void)
{
	struct task_struct *t;
	unsigned int i;
	int ret;

	if (lbs_engine_channels < 1 || lbs_engine_channels > LBS_ENGINE_MAX_CHANNELS) {
		pr_err("lbs-engine: channels=%u: must be 1 to %u\n",
		       lbs_engine_channels, LBS_ENGINE_MAX_CHANNELS);
		return -EINVAL;
	}
	if (lbs_engine_queue_depth < 1 || lbs_engine_queue_depth > LBS_ENGINE_MAX_DEPTH) {
		pr_err("lbs-engine: queue_depth=%u: must be 1 to %u\n",
		       lbs_engine_queue_depth, LBS_ENGINE_MAX_DEPTH);
		return -EINVAL;
	}
	if (lbs_engine_error_ppm > LBS_ENGINE_PPM) {
		pr_err("lbs-engine: error_rate_ppm=%u: must be 0 to %u\n",
		       lbs_engine_error_ppm, LBS_ENGINE_PPM);
		return -EINVAL;
	}
	spin_lock_init(&lbs_engine.lock);
	INIT_LIST_HEAD(&lbs_engine.pending);
	INIT_LIST_HEAD(&lbs_engine.backlog);
	init_waitqueue_head(&lbs_engine.wait);

	for (i = 0; i < lbs_engine_channels; i++) {
		t = kthread_run(lbs_engine_channel, NULL, "lbs-engine/%u", i);
		if (IS_ERR(t)) {
			ret = PTR_ERR(t);
			pr_err("lbs-engine: channel %u did not start: %d\n", i, ret);
			goto bad_channels;
		}
		lbs_engine_threads[i] = t;
	}
	ret = crypto_register_skcipher(&lbs_engine_alg);
	if (ret) {
		pr_err("lbs-engine: registering %s failed: %d\n",
		       LBS_ENGINE_DRIVER, ret);
		goto bad_channels;
	}
	ret = lbs_engine_sysfs_init();
	if (ret)
		goto bad_alg;
	pr_info("lbs-engine: %s: %u channels, queue depth %u, latency %u us\n",
		LBS_ENGINE_DRIVER, lbs_engine_channels, lbs_engine_queue_depth,
		lbs_engine_latency_us);
	return 0;

bad_alg:
	crypto_unregister_skcipher(&lbs_engine_alg);
bad_channels:
	lbs_engine_stop_channels();
	return ret;
}

static void __exit lbs_engine_exit(void)
{
	lbs_engine_sysfs_exit();
	crypto_unregister_skcipher(&lbs_engine_alg);
	lbs_engine_stop_channels();
	WARN_ON(lbs_engine.queued || !list_empty(&lbs_engine.backlog));
}

module_init(lbs_engine_init);
module_exit(lbs_engine_exit);

MODULE_DESCRIPTION("lbscrypt test rig: an emulated asynchronous xts(aes) offload engine");
MODULE_LICENSE("GPL");
