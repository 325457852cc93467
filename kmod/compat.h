/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-crypt-lbs: every difference between the kernels this target builds
 * for (6.1, 6.12, 7.2 and 7.3) is bridged here and nowhere else.
 */
#ifndef DM_CRYPT_LBS_COMPAT_H
#define DM_CRYPT_LBS_COMPAT_H

#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/blk-integrity.h>
#include <linux/bug.h>
#include <linux/compiler.h>
#include <linux/crypto.h>
#include <linux/device-mapper.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/minmax.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/stringify.h>
#include <linux/workqueue.h>
#include <crypto/aes.h>
#include <crypto/hash.h>
#include <crypto/md5.h>

/*
 * Differences are detected by Kbuild, which compiles a small test from
 * features/ against the kernel built for (not by version number), so a
 * distribution backport is handled like the release that introduced the
 * change.  A test that compiles defines:
 *   LBS_HAVE_LINUX_UNALIGNED_H      <linux/unaligned.h> exists (6.12)
 *   LBS_HAVE_LINUX_HEX_H            hex2bin() is in <linux/hex.h> (6.12,
 *                                   not 6.1), which <linux/kernel.h> no
 *                                   longer includes on 7.2
 *   LBS_HAVE_CRYPTO_COMPLETION_DATA crypto_completion_t takes the request's
 *                                   data pointer (6.3)
 *   LBS_HAVE_INTEGRITY_CSUM_TYPE    struct blk_integrity names its checksum
 *                                   in csum_type, not by a profile (6.11)
 *   LBS_HAVE_INTEGRITY_METADATA_SIZE struct blk_integrity's bytes per
 *                                   interval are metadata_size, not
 *                                   tuple_size (7.2; not 6.12)
 *   LBS_HAVE_BIOSET_INTEGRITY       bioset_integrity_create() exists (6.12;
 *                                   gone in 7.2)
 *   LBS_HAVE_AES_ENCKEY             the AES library encrypts with a
 *                                   struct aes_enckey (7.2; not 6.12)
 *   LBS_HAVE_MD5_LIB                the MD5 library: md5_init(),
 *                                   md5_update(), struct md5_ctx (7.2)
 *   LBS_HAVE_WQ_PERCPU              WQ_PERCPU exists (7.2, 6.12 stable)
 *   LBS_HAVE_ZONE_WRITE_PLUG        zone write plugging: dm core cuts a
 *                                   zoned write to the queue limits (6.10;
 *                                   not 6.1)
 * A constant the kernel defines as a macro (BLK_MAX_BLOCK_SIZE,
 * ARCH_DMA_MINALIGN) needs no test: #ifdef asks the compiler directly.
 */

#ifdef LBS_HAVE_LINUX_UNALIGNED_H
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

#ifdef LBS_HAVE_LINUX_HEX_H
#include <linux/hex.h>
#endif

/*
 * The largest encryption sector this kernel can take.  One sector is one
 * scatterlist entry inside one page, so PAGE_SIZE bounds it; the sector
 * size is also announced as the logical block size, which the block layer
 * caps at BLK_MAX_BLOCK_SIZE where that constant exists (6.15 and later).
 */
#ifdef BLK_MAX_BLOCK_SIZE
#define LBS_MAX_SECTOR_SIZE \
	min_t(unsigned int, PAGE_SIZE, BLK_MAX_BLOCK_SIZE)
static inline const char *lbs_max_sector_reason(void)
{
	unsigned long page = PAGE_SIZE;

	return page <= BLK_MAX_BLOCK_SIZE ? "PAGE_SIZE" : "BLK_MAX_BLOCK_SIZE";
}

#define LBS_MAX_SECTOR_REASON	lbs_max_sector_reason()
#else
#define LBS_MAX_SECTOR_SIZE	((unsigned int)PAGE_SIZE)
#define LBS_MAX_SECTOR_REASON	"PAGE_SIZE"
#endif

/* Crypto completion callbacks take the request's data pointer from 6.3. */
#ifdef LBS_HAVE_CRYPTO_COMPLETION_DATA
#define LBS_ASYNC_ARG void *
static inline void *lbs_async_data(void *data)
{
	return data;
}
#else
#define LBS_ASYNC_ARG struct crypto_async_request *
static inline void *lbs_async_data(struct crypto_async_request *areq)
{
	return areq->data;
}
#endif

/*
 * An integrity profile whose metadata is opaque to the block layer, free
 * for the target to fill: dm-integrity's without an internal hash.  It has
 * no checksum type (6.11 on); before, it is the profile "DM-DIF-EXT-TAG".
 */
#ifdef LBS_HAVE_INTEGRITY_CSUM_TYPE
static inline bool lbs_integrity_opaque(const struct blk_integrity *bi)
{
	return bi->csum_type == BLK_INTEGRITY_CSUM_NONE;
}
#else
static inline bool lbs_integrity_opaque(const struct blk_integrity *bi)
{
	return bi->profile && bi->profile->name &&
	       !strcmp(bi->profile->name, "DM-DIF-EXT-TAG");
}
#endif

/*
 * The alignment that keeps a buffer a device reads or writes by DMA in
 * cache lines of its own.  ARCH_DMA_MINALIGN is defined for every
 * architecture from 6.5; before, an architecture that needs it defines it,
 * and kmalloc's alignment is the bound elsewhere.
 */
#ifdef ARCH_DMA_MINALIGN
#define LBS_DMA_ALIGN	((unsigned int)ARCH_DMA_MINALIGN)
#else
#define LBS_DMA_ALIGN	((unsigned int)ARCH_KMALLOC_MINALIGN)
#endif

/*
 * Atomic writes through device-mapper (dm core 6.14 on): a target that
 * declares DM_TARGET_ATOMIC_WRITES gets REQ_ATOMIC bios, which it must pass
 * down whole, and bounds the atomic unit the device announces.
 */
#ifdef DM_TARGET_ATOMIC_WRITES
#define LBS_TARGET_ATOMIC_WRITES	DM_TARGET_ATOMIC_WRITES
static inline bool lbs_bio_atomic(const struct bio *bio)
{
	return bio->bi_opf & REQ_ATOMIC;
}

static inline void lbs_atomic_limits(struct queue_limits *limits,
				     unsigned int max_bytes)
{
	/* a unit the target cannot submit whole: no atomic writes at all */
	if (limits->atomic_write_hw_unit_min > max_bytes) {
		limits->atomic_write_hw_max = 0;
		return;
	}
	limits->atomic_write_hw_unit_max =
		min(limits->atomic_write_hw_unit_max, max_bytes);
	limits->atomic_write_hw_max =
		min(limits->atomic_write_hw_max, max_bytes);
}
#else
#define LBS_TARGET_ATOMIC_WRITES	0
static inline bool lbs_bio_atomic(const struct bio *bio)
{
	return false;
}

static inline void lbs_atomic_limits(struct queue_limits *limits,
				     unsigned int max_bytes)
{
}
#endif

/*
 * A device's atomic write limits, in bytes (REQ_ATOMIC, 6.11 on): the
 * smallest and largest atomic write, the boundary none may cross (0: none),
 * and what its segments hold of the bounce pages a write is made of.
 * False where the kernel or the device has no atomic writes.
 */
struct lbs_atomic_limits {
	unsigned int unit_min;
	unsigned int unit_max;
	unsigned int boundary;
	unsigned int seg_bytes;
};

#ifdef REQ_ATOMIC
static inline bool lbs_bdev_atomic_limits(struct block_device *bdev,
					  struct lbs_atomic_limits *lim)
{
	struct request_queue *q = bdev_get_queue(bdev);
	unsigned int segs = queue_max_segments(q);

	if (!bdev_can_atomic_write(bdev))
		return false;
	lim->unit_min = queue_atomic_write_unit_min_bytes(q);
	lim->unit_max = min(queue_atomic_write_unit_max_bytes(q),
			    queue_atomic_write_max_bytes(q));
	lim->boundary = queue_atomic_write_boundary_bytes(q);
	/* a bounce page may take several segments where they are small */
	lim->seg_bytes = min_t(u64, (u64)segs *
			       min_t(unsigned int, PAGE_SIZE,
				     queue_max_segment_size(q)), UINT_MAX);
	return lim->unit_min && lim->unit_max;
}

static inline void lbs_bio_set_atomic(struct bio *bio)
{
	bio->bi_opf |= REQ_ATOMIC;
}
#else
static inline bool lbs_bdev_atomic_limits(struct block_device *bdev,
					  struct lbs_atomic_limits *lim)
{
	return false;
}

static inline void lbs_bio_set_atomic(struct bio *bio)
{
}
#endif

/* The metadata bytes the device keeps per integrity interval. */
static inline unsigned int lbs_integrity_tuple_size(const struct blk_integrity *bi)
{
#ifdef LBS_HAVE_INTEGRITY_METADATA_SIZE
	return bi->metadata_size;
#else
	return bi->tuple_size;
#endif
}

/*
 * Reserve integrity payloads for the clones of bs.  Where the block layer
 * has no per-bio_set reserve (7.2), bio_integrity_alloc() takes them from
 * kmalloc, and there is nothing to set up.
 */
static inline int lbs_bioset_integrity_create(struct bio_set *bs,
					      int pool_size)
{
#ifdef LBS_HAVE_BIOSET_INTEGRITY
	return bioset_integrity_create(bs, pool_size);
#else
	return 0;
#endif
}

/*
 * An AES key for the AES library's single-block encryption (elephant's
 * sector keys): encryption only where the library has such a key (7.2), the
 * expanded key of both directions before.
 */
struct lbs_aes_key {
#ifdef LBS_HAVE_AES_ENCKEY
	struct aes_enckey key;
#else
	struct crypto_aes_ctx key;
#endif
};

static inline struct lbs_aes_key *lbs_aes_key_alloc(void)
{
	return kzalloc(sizeof(struct lbs_aes_key), GFP_KERNEL);
}

static inline int lbs_aes_setkey(struct lbs_aes_key *k, const u8 *key,
				 unsigned int len)
{
#ifdef LBS_HAVE_AES_ENCKEY
	return aes_prepareenckey(&k->key, key, len);
#else
	return aes_expandkey(&k->key, key, len);
#endif
}

static inline void lbs_aes_encrypt(const struct lbs_aes_key *k, u8 *out,
				   const u8 *in)
{
	aes_encrypt(&k->key, out, in);
}

/*
 * lmk's MD5: the four chaining words after whole 64-byte blocks, taken as
 * they stand (no padding, no length).  lbs_md5_words() hashes the parts in
 * turn; their lengths must add up to whole blocks.
 *
 * Where the kernel has the MD5 library (7.2; 6.1 and 6.12 do not), its
 * context holds the words after each update and no transform is used:
 * LBS_MD5_SHASH is NULL, and the "md5" shash need not exist (the in-tree
 * dm-crypt selects only the library, so on 7.2 the shash is often not built).
 * A kernel that has the library in its source but not in its configuration
 * has no MD5 at all (its "md5" shash is built on the library): lmk is
 * refused there.
 *
 * Before the library, the words come from the "md5" shash, whose exported
 * state is a struct md5_state with the words first; lbs_md5_check(), in the
 * constructor, refuses a transform that exports anything of another size,
 * or a state that does not start with MD5's initial words.
 */
struct lbs_md5_part {
	const void *data;
	unsigned int len;
};

#if defined(LBS_HAVE_MD5_LIB)
#define LBS_MD5_SHASH	NULL

static inline const char *lbs_md5_check(struct crypto_shash *tfm)
{
	if (!IS_ENABLED(CONFIG_CRYPTO_LIB_MD5))
		return "the kernel is built without its MD5 library (CONFIG_CRYPTO_LIB_MD5)";
	return NULL;
}

static inline int lbs_md5_words(struct crypto_shash *tfm,
				const struct lbs_md5_part *parts,
				unsigned int n, u32 words[MD5_HASH_WORDS])
{
#if IS_ENABLED(CONFIG_CRYPTO_LIB_MD5)
	struct md5_ctx ctx;
	unsigned int i;

	md5_init(&ctx);
	for (i = 0; i < n; i++)
		md5_update(&ctx, parts[i].data, parts[i].len);
	memcpy(words, ctx.state.h, MD5_DIGEST_SIZE);
	memzero_explicit(&ctx, sizeof(ctx));
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}
#else
#define LBS_MD5_SHASH		"md5"

static inline int lbs_md5_words(struct crypto_shash *tfm,
				const struct lbs_md5_part *parts,
				unsigned int n, u32 words[MD5_HASH_WORDS])
{
	SHASH_DESC_ON_STACK(desc, tfm);
	struct md5_state state;
	unsigned int i;
	int r;

	if (WARN_ON_ONCE(crypto_shash_statesize(tfm) != sizeof(state)))
		return -EINVAL;
	desc->tfm = tfm;
	r = crypto_shash_init(desc);
	for (i = 0; i < n && !r; i++)
		r = crypto_shash_update(desc, parts[i].data, parts[i].len);
	if (!r)
		r = crypto_shash_export(desc, &state);
	if (!r)
		memcpy(words, state.hash, MD5_DIGEST_SIZE);
	shash_desc_zero(desc);
	memzero_explicit(&state, sizeof(state));
	return r;
}

static inline const char *lbs_md5_check(struct crypto_shash *tfm)
{
	static const u32 initial[MD5_HASH_WORDS] = {
		MD5_H0, MD5_H1, MD5_H2, MD5_H3
	};
	u32 words[MD5_HASH_WORDS];

	if (crypto_shash_statesize(tfm) != sizeof(struct md5_state))
		return "md5's exported state is not a struct md5_state";
	if (lbs_md5_words(tfm, NULL, 0, words) ||
	    memcmp(words, initial, sizeof(words)))
		return "md5's exported state does not start with the chaining words";
	return NULL;
}
#endif

/*
 * A workqueue bound to CPUs says so with WQ_PERCPU (7.2, and 6.12 stable; 7.2
 * warn about a workqueue with neither it nor WQ_UNBOUND).  Before, that was
 * the default and the flag does not exist.
 */
#ifdef LBS_HAVE_WQ_PERCPU
#define LBS_WQ_PERCPU	WQ_PERCPU
#else
#define LBS_WQ_PERCPU	0
#endif

/*
 * Who cuts a write to a zoned device.  With zone write plugging, dm core
 * cuts it to the queue limits lbs_io_hints() sets, and the target must not
 * (the rest would be issued from the plug's work, which a queue freeze can
 * deadlock).  Before it, dm core passes a zoned write on whole, however
 * large (a direct write from huge pages can carry megabytes in a few
 * bio_vecs), and the target cuts it as any other write: the rest is
 * resubmitted by dm core in the same task, behind the part taken, so the
 * writes still reach the zone in order.
 */
#ifdef LBS_HAVE_ZONE_WRITE_PLUG
#define LBS_DM_CUTS_ZONED_WRITES	true
#else
#define LBS_DM_CUTS_ZONED_WRITES	false
#endif

/* Keyring key types that exist only when the kernel config has them. */
#define LBS_HAVE_KEYRING		IS_ENABLED(CONFIG_KEYS)
#define LBS_HAVE_ENCRYPTED_KEYS		IS_ENABLED(CONFIG_ENCRYPTED_KEYS)
#define LBS_HAVE_TRUSTED_KEYS		IS_ENABLED(CONFIG_TRUSTED_KEYS)

#endif /* DM_CRYPT_LBS_COMPAT_H */
