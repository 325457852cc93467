/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-crypt-lbs: a device-mapper crypt target whose encryption sector may be
 * as large as the page size.  Shared definitions of the target's files.
 */
#ifndef DM_CRYPT_LBS_H
#define DM_CRYPT_LBS_H

#include <linux/bio.h>
#include <linux/blk_types.h>
#include <linux/completion.h>
#include <linux/device-mapper.h>
#include <linux/mempool.h>
#include <linux/mutex.h>
#include <linux/rbtree.h>
#include <linux/refcount.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <linux/highmem.h>
#include <crypto/aead.h>
#include <crypto/skcipher.h>

#include "compat.h"

#define DM_MSG_PREFIX "crypt-lbs"

/*
 * Optional table parameters, in the order STATUSTYPE_TABLE prints them
 * (dm-crypt's order).  The enum value is the bit in lbs_config.opts; the
 * names live in lbs_opt_names[] and are used by the parser and by status.
 */
enum lbs_opt {
	LBS_OPT_ALLOW_DISCARDS,
	LBS_OPT_SAME_CPU_CRYPT,
	LBS_OPT_HIGH_PRIORITY,
	LBS_OPT_SUBMIT_FROM_CRYPT_CPUS,
	LBS_OPT_NO_READ_WORKQUEUE,
	LBS_OPT_NO_WRITE_WORKQUEUE,
	LBS_OPT_INTEGRITY,	/* integrity:<bytes>:<type> */
	LBS_OPT_SECTOR_SIZE,	/* set only when sector_size != 512 */
	LBS_OPT_IV_LARGE_SECTORS,
	LBS_OPT_INTEGRITY_KEY_SIZE,	/* integrity_key_size:<bytes> */
	LBS_NR_OPTS
};

/* The options that carry a value after a colon; the others are flags. */
static inline bool lbs_opt_valued(unsigned int opt)
{
	return opt == LBS_OPT_INTEGRITY || opt == LBS_OPT_SECTOR_SIZE ||
	       opt == LBS_OPT_INTEGRITY_KEY_SIZE;
}

extern const char * const lbs_opt_names[LBS_NR_OPTS];

/* Most optional parameters one table may carry (dm-crypt's own bound). */
#define LBS_MAX_OPT_PARAMS	9

/* Bits in lbs_config.state */
enum lbs_state {
	LBS_KEY_VALID,
	LBS_SUSPENDED,
};

#define LBS_MIN_SECTOR_SIZE	((unsigned int)SECTOR_SIZE)

/*
 * Integrity metadata (integrity.c).  The largest integrity:<bytes> dm-crypt
 * takes; the largest sector dm-integrity, which holds the metadata, can
 * have (its block size, which must equal sector_size).
 */
#define LBS_MAX_TAG_SIZE	480U
#define LBS_INTEGRITY_MAX_SECTOR	4096U

/*
 * The largest key a table or "key set" may give, in bytes: 64 keys of 256
 * bytes, far above any cipher's key.  A larger one is refused before
 * anything is allocated for it.
 */
#define LBS_MAX_KEY_SIZE	16384U

/* Crypto requests and clone bios reserved per device. */
#define LBS_MIN_IOS		64

/*
 * Largest write handled as one bounce bio: 1 MiB (at least one page), so
 * that the bounce page pool reserves the same memory on every page size.
 */
#define LBS_BOUNCE_PAGES	max_t(unsigned int, 1, \
				      min_t(unsigned int, BIO_MAX_VECS, \
					    SZ_1M >> PAGE_SHIFT))

struct crypto_aes_ctx;
struct lbs_config;
struct lbs_req;

/*
 * An IV generator.  gen() runs in process context (a workqueue) and may
 * sleep; it fills cc->iv_size bytes at iv for the sector in lr.
 */
struct lbs_iv_ops {
	const char *name;
	int (*ctr)(struct lbs_config *cc, struct dm_target *ti,
		   const char *opts);
	/* takes its part of cc->key (after the cipher keys) when a key is set */
	int (*init)(struct lbs_config *cc);
	int (*gen)(struct lbs_config *cc, u8 *iv, struct lbs_req *lr);
	/* after the request succeeded; may not sleep (a driver's completion) */
	int (*post)(struct lbs_config *cc, u8 *iv, struct lbs_req *lr);
	/* the request needs a scratch skcipher request for the IV (sleeps) */
	bool needs_scratch;
	/* the IV is the plain64 counter: made inline, gen() not called */
	bool counter64;
	/* usable with an AEAD cipher (it touches no data and no skcipher) */
	bool aead_ok;
	/* the IV is kept in the integrity metadata (random) */
	bool stored;
};

struct lbs_config {
	struct dm_dev *dev;
	sector_t start;		/* on dev, in 512-byte sectors */
	u64 iv_offset;		/* added to the sector number for IVs */

	char *cipher_string;	/* as given in the table, for status */
	struct crypto_skcipher **tfms;	/* NULL with an AEAD cipher */
	struct crypto_aead *aead;	/* integrity:<n>:aead: the one transform */
	unsigned int tfms_count;
	unsigned int iv_size;
	unsigned int iv_align;	/* the transform's alignmask + 1 */
	const struct lbs_iv_ops *iv_ops;
	unsigned int benbi_shift;
	unsigned int key_extra_size;	/* key bytes after the cipher keys */
	unsigned int key_parts;	/* the key's parts: cipher keys + the IV's */
	struct crypto_shash *iv_hash;	/* lmk: md5; tcw: crc32 */
	u8 *iv_seed;		/* lmk: seed block; tcw: IV seed, whitening */
	struct lbs_aes_key *iv_aes;	/* elephant: the sector-key key */

	/* integrity (integrity.c) */
	unsigned int tag_size;	/* integrity:<bytes>: tag and stored IV */
	char *integrity_type;	/* integrity:...:<type> as written */
	bool want_aead;		/* the type is "aead" */
	unsigned int key_mac_size;	/* authenc(): the MAC key, end of the key */
	u8 *authenc_key;	/* authenc(): setkey's key blob, wiped after use */
	unsigned int auth_size;	/* AEAD tag bytes in each tuple */
	unsigned int stored_iv_size;	/* IV bytes after the tag (random) */
	unsigned int tuple_size;	/* metadata bytes per sector on the device */
	unsigned int tag_pool_sectors;	/* 512-byte sectors one pool entry covers */
	mempool_t tag_pool;

	unsigned int sector_size;
	unsigned int sector_shift;	/* log2(sector_size) - SECTOR_SHIFT */
	unsigned long opts;		/* bits of enum lbs_opt */
	unsigned long state;		/* bits of enum lbs_state */
	/*
	 * A zoned device: writes are encrypted and submitted in the
	 * submitter's context, one request after the other, so they reach the
	 * device in the order they came (dm emulates zone append).
	 */
	bool write_inline;
	/* bytes of the largest atomic write piece (atomic.c); 0: none */
	unsigned int atomic_unit;

	/* layout of one crypto request element of req_pool */
	unsigned int req_lr_off;	/* struct lbs_req */
	unsigned int req_iv_off;	/* IV, before alignment */
	unsigned int req_scratch_off;	/* scratch skcipher request */
	unsigned int req_size;
	unsigned int per_io_size;	/* struct lbs_io + its own request */

	mempool_t req_pool;
	mempool_t page_pool;
	bool bounce_limited;	/* page_pool filled: the share applies */
	struct list_head bounce_node;	/* in bounce.c's list of devices */
	/* bounce pages held now and at most: a line apart from the above */
	atomic_long_t bounce_held ____cacheline_aligned_in_smp;
	atomic_long_t bounce_peak;
	struct bio_set bs;
	struct mutex bounce_lock;	/* serialises reserve-draining writers */
	int wq_id;		/* in the workqueues' names; 0: none taken */
	struct workqueue_struct *io_wq;
	struct workqueue_struct *crypt_wq;
	spinlock_t write_lock;		/* protects write_tree */
	struct rb_root write_tree;	/* encrypted writes, by sector */
	struct task_struct *write_thread;

	struct mutex key_lock;	/* key changes against suspend and resume */
	char *key_string;	/* "<type>:<description>" of a keyring key */
	unsigned int key_size;
	u8 key[];
};

/* A key read from a table or message, before the transforms take it. */
struct lbs_key {
	u8 *bytes;	/* cc->key_size bytes */
	char *string;	/* a keyring key's "<type>:<description>", or NULL */
};

/* Per-bio state, in the bio's dm per-bio data. */
struct lbs_io {
	struct lbs_config *cc;
	struct bio *base;
	struct bio *clone;
	sector_t sector;	/* target-relative, advanced by conversion */
	sector_t first_sector;	/* where the bio starts, target-relative */
	struct bio *bio_in;
	struct bio *bio_out;
	struct bvec_iter iter_in;
	struct bvec_iter iter_out;
	atomic_t pending;	/* one for the converter + one per request */
	blk_status_t error;
	void *req;		/* skcipher or aead request in hand, or NULL */
	u8 *tags;		/* integrity metadata of the bio, or NULL */
	bool tags_from_pool;	/* tags came from tag_pool */
	unsigned int tag_index;	/* the next sector's tuple in tags */
	bool tag_failed;	/* a tag did not match */
	bool rechecking;	/* read again into clone's own pages */
	struct bvec_iter recheck_iter;	/* clone's, as submitted */
	bool own_req_used;	/* the embedded request was handed out */
	bool restart_wait;	/* wait for restart before the next request */
	bool write_inline;	/* each request's end is waited for (zoned) */
	bool atomic_pieces;	/* a write cut into pieces the device writes
				 * atomically, each sent as REQ_ATOMIC
				 * (atomic.c)
				 */
	struct completion restart;	/* a backlogged request was queued */
	struct completion req_done;	/* write_inline: the request ended */
	struct work_struct work;	/* read submit, then crypt */
	struct rb_node rb_node;		/* in write_tree, waiting to be submitted */
};

/* The bio's own crypto request follows struct lbs_io in the per-bio data. */
#define LBS_IO_REQ_OFFSET	ALIGN(sizeof(struct lbs_io), CRYPTO_MINALIGN)

/* Lives after the skcipher_request or aead_request in a req_pool element. */
struct lbs_req {
	struct lbs_io *io;
	struct scatterlist sg_in;
	struct scatterlist sg_out;
	u64 iv_sector;
	atomic_t state;		/* LBS_REQ_*: who has seen what, below */
	refcount_t refs;	/* the converter's and the completion's holds */
	u8 *tag;		/* the sector's tuple in io->tags, or NULL */
	struct scatterlist sg_aead[4];	/* AEAD: sector, IV, data, tag */
};

/*
 * lbs_req.state: the converter and the driver's completion each set their
 * bits with one atomic step and read the other's, so whichever comes second
 * knows what the first saw (io.c, lbs_crypt_done() and lbs_sent()): whether
 * a backlogged request was accepted before the converter waits for it.  A
 * request the driver took is freed by whichever of the two drops its hold
 * on lbs_req.refs last (lbs_req_put()).
 */
#define LBS_REQ_NOTIFIED	BIT(0)	/* the driver said -EINPROGRESS */
#define LBS_REQ_DONE		BIT(1)	/* the request ended */
#define LBS_REQ_BUSY		BIT(2)	/* the converter was told -EBUSY */

static inline struct lbs_req *lbs_req_of(struct lbs_config *cc, void *req)
{
	return (struct lbs_req *)((u8 *)req + cc->req_lr_off);
}

/* The IV the cipher works on (and may change). */
static inline u8 *lbs_req_iv(struct lbs_config *cc, struct lbs_req *lr)
{
	u8 *base = (u8 *)lr - cc->req_lr_off + cc->req_iv_off;

	return PTR_ALIGN(base, cc->iv_align);
}

/* AEAD: the IV as generated, in the associated data; after lbs_req_iv(). */
static inline u8 *lbs_req_org_iv(struct lbs_config *cc, struct lbs_req *lr)
{
	return lbs_req_iv(cc, lr) + cc->iv_size;
}

/* AEAD: the sector number of the associated data, after the two IVs. */
static inline __le64 *lbs_req_ad(struct lbs_config *cc, struct lbs_req *lr)
{
	return (__le64 *)(lbs_req_iv(cc, lr) +
			  ALIGN(2 * cc->iv_size, sizeof(__le64)));
}

/*
 * The bytes at lbs_req_iv() a crypto driver may read or write by DMA: the
 * IV, and with AEAD the original IV and the associated data.  They get
 * cache lines of their own (io.c), apart from the fields of lbs_req the
 * CPU writes while a request is in flight.
 */
static inline unsigned int lbs_req_dma_size(struct lbs_config *cc)
{
	if (!cc->aead)
		return cc->iv_size;
	return ALIGN(2 * cc->iv_size, sizeof(__le64)) + sizeof(__le64);
}

static inline struct skcipher_request *lbs_req_scratch(struct lbs_config *cc,
						       struct lbs_req *lr)
{
	return (struct skcipher_request *)((u8 *)lr - cc->req_lr_off +
					   cc->req_scratch_off);
}

/* plain64: the 64-bit sector number, little-endian, zero padded */
static inline void lbs_iv_put_plain64(struct lbs_config *cc, u8 *iv,
				      u64 sector)
{
	memset(iv, 0, cc->iv_size);
	put_unaligned_le64(sector, iv);
}

/*
 * A sector's IV, for either cipher kind: the counter modes inline, the
 * others by the mode's gen(); with random, a write stores the IV in the
 * sector's integrity metadata (after the tag) and a read takes it from there.
 */
static inline int lbs_make_iv(struct lbs_config *cc, struct lbs_req *lr,
			      u8 *iv, bool write)
{
	u8 *stored = cc->stored_iv_size ? lr->tag + cc->auth_size : NULL;
	int r = 0;

	if (stored && !write) {
		memcpy(iv, stored, cc->stored_iv_size);
		return 0;
	}
	if (cc->iv_ops->counter64)
		lbs_iv_put_plain64(cc, iv, lr->iv_sector);
	else
		r = cc->iv_ops->gen(cc, iv, lr);
	if (!r && stored)
		memcpy(stored, iv, cc->stored_iv_size);
	return r;
}

/* Map one sector of a request's scatterlist entry (it lies in one page). */
static inline u8 *lbs_map_sector(struct scatterlist *sg)
{
	return (u8 *)kmap_local_page(sg_page(sg)) + sg->offset;
}

static inline void lbs_unmap_sector(u8 *data, struct scatterlist *sg)
{
	kunmap_local(data - sg->offset);
}

/*
 * A bio the target passes on whole, never cut: an atomic write (written
 * whole or not at all), and a write to a zoned device on a kernel where dm
 * core cuts those itself (compat.h).  lbs_io_hints() bounds both to one
 * bounce bio and one integrity metadata pool entry.
 */
static inline bool lbs_bio_whole(struct lbs_config *cc, struct bio *bio)
{
	return lbs_bio_atomic(bio) ||
	       (LBS_DM_CUTS_ZONED_WRITES && cc->write_inline &&
		bio_data_dir(bio) == WRITE);
}

/* reject.c */
int lbs_reject(struct dm_target *ti, char *error, const char *fmt, ...)
	__printf(3, 4);

/* table.c */
int lbs_parse_u64(const char *s, u64 *val);
int lbs_parse_options(struct dm_target *ti, struct lbs_config *cc,
		      unsigned int argc, char **argv);
int lbs_parse_cipher(struct dm_target *ti, struct lbs_config *cc,
		     const char *cipher_in, char *key);
int lbs_key_size(const char *key);
int lbs_read_key(struct lbs_config *cc, char *arg, struct lbs_key *new);
int lbs_apply_key(struct lbs_config *cc, struct lbs_key *new);
int lbs_set_key(struct lbs_config *cc, char *key);
int lbs_wipe_key(struct lbs_config *cc);
void lbs_free_cipher(struct lbs_config *cc);

/* iv.c */
int lbs_iv_lookup(struct dm_target *ti, struct lbs_config *cc,
		  const char *ivmode);
unsigned int lbs_iv_scratch_size(struct lbs_config *cc);
void lbs_iv_dtr(struct lbs_config *cc);
int lbs_iv_eboiv_ctr(struct lbs_config *cc, struct dm_target *ti,
		     const char *opts);
int lbs_iv_eboiv_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr);

/* elephant.c */
int lbs_elephant_ctr(struct lbs_config *cc, struct dm_target *ti,
		     const char *opts);
int lbs_elephant_init(struct lbs_config *cc);
int lbs_elephant_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr);
int lbs_elephant_post(struct lbs_config *cc, u8 *iv, struct lbs_req *lr);

/* integrity.c */
int lbs_parse_integrity(struct dm_target *ti, struct lbs_config *cc,
			const char *arg);
int lbs_parse_integrity_key_size(struct dm_target *ti, struct lbs_config *cc,
				 const char *arg);
int lbs_aead_alloc(struct dm_target *ti, struct lbs_config *cc,
		   const char *api);
int lbs_aead_setkey(struct lbs_config *cc);
void lbs_aead_free(struct lbs_config *cc);
unsigned int lbs_cipher_blocksize(struct lbs_config *cc);
int lbs_integrity_ctr(struct dm_target *ti, struct lbs_config *cc);
void lbs_integrity_exit(struct lbs_config *cc);
bool lbs_integrity_map(struct lbs_io *io, struct bio *bio);
void lbs_integrity_wait(struct lbs_io *io);
int lbs_integrity_attach(struct lbs_io *io, struct bio *clone, gfp_t gfp);
void lbs_integrity_free(struct lbs_io *io);
void lbs_integrity_sector(struct lbs_io *io, struct lbs_req *lr, bool write);
int lbs_aead_crypt(struct lbs_io *io, struct aead_request *req,
		   struct lbs_req *lr, bool write, u32 flags);

/* bounce.c */
int lbs_bounce_init(struct lbs_config *cc);
void lbs_bounce_exit(struct lbs_config *cc);
struct bio *lbs_alloc_bounce(struct lbs_io *io, bio_end_io_t *end_io);
void lbs_free_bounce(struct lbs_config *cc, struct bio *clone);

/* atomic.c */
void lbs_atomic_ctr(struct lbs_config *cc);
unsigned int lbs_atomic_sectors(struct lbs_config *cc, struct bio *bio,
				sector_t offset);

/* writer.c */
int lbs_writer_init(struct lbs_config *cc, const char *dev);
void lbs_writer_exit(struct lbs_config *cc);
void lbs_queue_write(struct lbs_io *io);

/* io.c */
void lbs_crypt_done(LBS_ASYNC_ARG areq, int err);
int lbs_io_init(struct dm_target *ti, struct lbs_config *cc);
void lbs_io_exit(struct lbs_config *cc);
int lbs_map(struct dm_target *ti, struct bio *bio);

#endif /* DM_CRYPT_LBS_H */
