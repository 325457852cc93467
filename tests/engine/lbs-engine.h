/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * lbs-engine: an emulated offload engine for the lbscrypt test rig.
 *
 * One engine per module, shared by every transform, as one device is: a
 * bounded hardware queue served by a fixed number of channels.  Each
 * request costs a fixed latency (a sleep, no CPU), then the real AES-XTS
 * through a synchronous software fallback, then an asynchronous
 * completion.  Test-only: it lives under tests/, never in the DKMS payload.
 */
#ifndef LBS_ENGINE_H
#define LBS_ENGINE_H

#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <crypto/skcipher.h>

#define LBS_ENGINE_ALG		"xts(aes)"
#define LBS_ENGINE_DRIVER	"lbs-engine-xts-aes"
/* Below every software xts(aes): only a caller that names the driver gets it. */
#define LBS_ENGINE_PRIORITY	1

#define LBS_ENGINE_MAX_CHANNELS	64
#define LBS_ENGINE_MAX_DEPTH	4096

/* What the engine counts; read through /sys/kernel/lbs_engine/stats. */
struct lbs_engine_stats {
	u64 submitted;		/* accepted into the hardware queue at once */
	u64 backlogged;		/* full queue, MAY_BACKLOG: -EBUSY returned */
	u64 rejected;		/* full queue, no MAY_BACKLOG: -ENOSPC returned */
	u64 completed;		/* completed with the fallback's result */
	u64 injected;		/* completed with -EIO by error injection */
	u64 bytes;		/* bytes of the completed requests */
	unsigned int peak;	/* most requests in the hardware queue at once */
	unsigned int backlog_peak;	/* most requests in the backlog at once */
};

struct lbs_engine {
	spinlock_t lock;	/* protects everything below */
	struct list_head pending;	/* accepted, waiting for a channel */
	struct list_head backlog;	/* waiting for room in the queue */
	unsigned int queued;	/* accepted and not yet completed */
	unsigned int backlog_len;	/* requests in the backlog */
	struct lbs_engine_stats stats;
	wait_queue_head_t wait;	/* channels sleep here for work */
};

/* Completion callbacks take the request's data pointer from 6.3 (Kbuild). */
#ifdef LBS_ENGINE_COMPLETION_TAKES_DATA
#define LBS_ENGINE_DONE_ARG void *
static inline void *lbs_engine_done_data(void *data)
{
	return data;
}
#else
#define LBS_ENGINE_DONE_ARG struct crypto_async_request *
static inline void *lbs_engine_done_data(struct crypto_async_request *areq)
{
	return areq->data;
}
#endif

extern struct lbs_engine lbs_engine;
extern unsigned int lbs_engine_latency_us;
extern unsigned int lbs_engine_channels;
extern unsigned int lbs_engine_queue_depth;

void lbs_engine_read_stats(struct lbs_engine_stats *out);

int lbs_engine_sysfs_init(void);
void lbs_engine_sysfs_exit(void);

#endif /* LBS_ENGINE_H */
