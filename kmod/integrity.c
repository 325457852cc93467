// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: authenticated encryption and integrity metadata, on a
 * backing device that keeps opaque per-sector metadata (dm-integrity
 * without its own hash, as integritysetup and cryptsetup's LUKS2
 * --integrity set it up).  The format is dm-crypt's:
 *
 *   integrity:<bytes>:<type>   <bytes> of each sector's metadata tuple are
 *                              ours; <type> is "aead" (the cipher is an
 *                              AEAD, named in the capi: form) or "none".
 *   integrity_key_size:<bytes> authenc(): the MAC key's size (default: the
 *                              hash's digest size).
 *
 * A tuple (the device's tuple_size bytes per sector) holds, in order:
 *   the AEAD tag (auth_size = <bytes> - stored IV),
 *   the IV of the IV mode random (stored_iv_size = the cipher's IV size),
 *   zeros up to tuple_size (written; not read).
 * Without AEAD (IV mode random over an skcipher) the tuple holds the IV
 * alone, at its start.
 *
 * An AEAD request covers, for one sector:
 *   associated data: the sector number (512-byte units, relative to the
 *                    mapping, without iv_offset; 64-bit little-endian),
 *                    then the IV as generated (iv_size bytes);
 *   data:            the sector, encrypted in place;
 *   tag:             auth_size bytes, in the sector's tuple.
 * authenc() takes a key of the encryption key followed by the MAC key
 * (integrity_key_size bytes at the end of the table's key); the transform
 * is given them as the crypto API's authenc key blob: an rtattr with the
 * encryption key's length, the MAC key, the encryption key.
 *
 * A tag that does not match fails the read with BLK_STS_PROTECTION.
 *
 * Memory: each bio's metadata is kmalloc'ed when that succeeds at once;
 * otherwise the bio is cut to what one tag_pool entry covers and the entry
 * is taken from the pool, waiting in lbs_map() (the submitter's task, as
 * dm-crypt) for an entry a completing bio gives back.  Entries are held
 * only by bios in flight, whose completion waits for no entry: crypt_wq and
 * the writer thread never wait for the pool.  Were lbs_map() called where
 * it may not sleep, the wait moves to io_wq (lbs_integrity_wait()).
 */

#include <linux/bio.h>
#include <linux/highmem.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/rtnetlink.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <crypto/authenc.h>

#include "dm-crypt-lbs.h"

/* A tag_pool entry covers at least this many bytes of tuples (dm-crypt's). */
#define LBS_TAG_POOL_ENTRY	512U

/* The authenc key blob's header: an rtattr and the encryption key length. */
#define LBS_AUTHENC_HDR	RTA_SPACE(sizeof(struct crypto_authenc_key_param))

/* "<bytes>:<type>" of integrity:<bytes>:<type> */
int lbs_parse_integrity(struct dm_target *ti, struct lbs_config *cc,
			const char *arg)
{
	const char *type = strchr(arg, ':');
	char num[12];
	u64 val;

	if (!type || type == arg || type - arg >= sizeof(num))
		return lbs_reject(ti, "integrity is not integrity:<bytes>:<type>",
				  "integrity:%s: expected integrity:<bytes>:<type>, as in integrity:28:aead",
				  arg);
	memcpy(num, arg, type - arg);
	num[type - arg] = '\0';
	type++;
	if (lbs_parse_u64(num, &val) || !val || val > LBS_MAX_TAG_SIZE)
		return lbs_reject(ti, "integrity tag size is not a number from 1 to 480",
				  "integrity:%s: the tag size %s is not a number from 1 to %u",
				  arg, num, LBS_MAX_TAG_SIZE);
	if (strcasecmp(type, "aead") && strcasecmp(type, "none"))
		return lbs_reject(ti, "Unknown integrity type (aead or none)",
				  "integrity:%s: type \"%s\" unknown; it is aead (an AEAD cipher, such as capi:authenc(hmac(sha256),xts(aes))-random) or none",
				  arg, type);
	kfree(cc->integrity_type);
	cc->integrity_type = kstrdup(type, GFP_KERNEL);
	if (!cc->integrity_type) {
		ti->error = "Cannot allocate the integrity type";
		return -ENOMEM;
	}
	cc->tag_size = val;
	cc->want_aead = !strcasecmp(type, "aead");
	set_bit(LBS_OPT_INTEGRITY, &cc->opts);
	return 0;
}

int lbs_parse_integrity_key_size(struct dm_target *ti, struct lbs_config *cc,
				 const char *arg)
{
	u64 val;

	if (lbs_parse_u64(arg, &val) || !val || val > LBS_MAX_KEY_SIZE)
		return lbs_reject(ti, "integrity_key_size is not a number from 1 to 16384",
				  "integrity_key_size:%s is not a number from 1 to %u",
				  arg, LBS_MAX_KEY_SIZE);
	cc->key_mac_size = val;
	set_bit(LBS_OPT_INTEGRITY_KEY_SIZE, &cc->opts);
	return 0;
}

/* authenc(...) alone or inside essiv(...): the authenc part of api, or NULL */
static const char *lbs_authenc_of(const char *api)
{
	if (strstarts(api, "essiv("))
		api += strlen("essiv(");
	return strstarts(api, "authenc(") ? api : NULL;
}

int lbs_aead_alloc(struct dm_target *ti, struct lbs_config *cc,
		   const char *api)
{
	struct crypto_aead *tfm;

	tfm = crypto_alloc_aead(api, 0, CRYPTO_ALG_ALLOCATES_MEMORY);
	if (IS_ERR(tfm)) {
		int r = PTR_ERR(tfm);

		DMERR("cipher %s: this kernel has no AEAD %s (%d)",
		      cc->cipher_string, api, r);
		ti->error = "AEAD cipher not available in this kernel";
		return r == -ENOENT ? -EINVAL : r;
	}
	cc->aead = tfm;
	cc->tfms_count = 1;
	cc->iv_align = crypto_aead_alignmask(tfm) + 1;
	cc->iv_size = crypto_aead_ivsize(tfm);
	DMDEBUG("%s uses %s", api, crypto_aead_driver_name(tfm));

	if (!lbs_authenc_of(api)) {
		if (test_bit(LBS_OPT_INTEGRITY_KEY_SIZE, &cc->opts))
			return lbs_reject(ti, "integrity_key_size needs an authenc() cipher",
					  "cipher %s: integrity_key_size:%u is the MAC key of an authenc() cipher; this one has none",
					  cc->cipher_string, cc->key_mac_size);
		return 0;
	}
	/* the MAC key is as long as the hash's digest, unless given */
	if (!test_bit(LBS_OPT_INTEGRITY_KEY_SIZE, &cc->opts))
		cc->key_mac_size = crypto_aead_maxauthsize(tfm);
	if (cc->key_mac_size >= cc->key_size)
		return lbs_reject(ti, "integrity_key_size leaves no encryption key",
				  "cipher %s: key of %u bytes, of which the MAC key takes %u; the encryption key needs the rest",
				  cc->cipher_string, cc->key_size, cc->key_mac_size);
	cc->authenc_key = kmalloc(LBS_AUTHENC_HDR + cc->key_size, GFP_KERNEL);
	if (!cc->authenc_key) {
		ti->error = "Cannot allocate the authenc key";
		return -ENOMEM;
	}
	return 0;
}

/* The table's key is enc || mac; authenc() wants its blob. */
int lbs_aead_setkey(struct lbs_config *cc)
{
	unsigned int len = cc->key_size - cc->key_extra_size;
	unsigned int enc = len - cc->key_mac_size;
	struct crypto_authenc_key_param *param;
	struct rtattr *rta;
	u8 *p = cc->authenc_key;
	int r;

	if (!p)
		return crypto_aead_setkey(cc->aead, cc->key, len);
	rta = (struct rtattr *)p;
	rta->rta_type = CRYPTO_AUTHENC_KEYA_PARAM;
	rta->rta_len = RTA_LENGTH(sizeof(*param));
	param = RTA_DATA(rta);
	param->enckeylen = cpu_to_be32(enc);
	memcpy(p + LBS_AUTHENC_HDR, cc->key + enc, cc->key_mac_size);
	memcpy(p + LBS_AUTHENC_HDR + cc->key_mac_size, cc->key, enc);
	r = crypto_aead_setkey(cc->aead, p, LBS_AUTHENC_HDR + len);
	memzero_explicit(p, LBS_AUTHENC_HDR + len);
	return r;
}

/* Safe on any config. */
void lbs_aead_free(struct lbs_config *cc)
{
	if (cc->aead)
		crypto_free_aead(cc->aead);
	cc->aead = NULL;
	kfree_sensitive(cc->authenc_key);
	cc->authenc_key = NULL;
}

unsigned int lbs_cipher_blocksize(struct lbs_config *cc)
{
	return cc->aead ? crypto_aead_blocksize(cc->aead) :
			  crypto_skcipher_blocksize(cc->tfms[0]);
}

/*
 * After the backing device is open: check its integrity profile against
 * the table, set the tag size and make the metadata pool.
 */
int lbs_integrity_ctr(struct dm_target *ti, struct lbs_config *cc)
{
	const char *dev = cc->dev->name;
	struct blk_integrity *bi;
	unsigned int n;
	int r;

	if ((test_bit(LBS_OPT_INTEGRITY, &cc->opts) || cc->stored_iv_size) &&
	    cc->sector_size > LBS_INTEGRITY_MAX_SECTOR)
		return lbs_reject(ti, "sector_size above 4096 with integrity",
				  "sector_size %u with integrity metadata or IV mode random: the metadata is kept per dm-integrity block, at most %u bytes",
				  cc->sector_size, LBS_INTEGRITY_MAX_SECTOR);
	if (!cc->aead && !cc->stored_iv_size)
		return 0;	/* integrity:<n>:none alone: nothing is stored */

	bi = blk_get_integrity(cc->dev->bdev->bd_disk);
	if (!bi || !lbs_integrity_opaque(bi))
		return lbs_reject(ti, "Integrity profile not supported",
				  "device %s has no opaque integrity metadata (a dm-integrity device without its own hash has); %s needs it",
				  dev, cc->aead ? "an AEAD cipher" : "IV mode random");
	if (lbs_integrity_tuple_size(bi) < cc->tag_size)
		return lbs_reject(ti, "Integrity profile tag size mismatch",
				  "device %s keeps %u metadata bytes per sector; integrity:%u needs more",
				  dev, lbs_integrity_tuple_size(bi), cc->tag_size);
	if ((1U << bi->interval_exp) != cc->sector_size)
		return lbs_reject(ti, "Integrity profile sector size mismatch",
				  "device %s keeps metadata per %u bytes; sector_size is %u",
				  dev, 1U << bi->interval_exp, cc->sector_size);
	cc->tuple_size = lbs_integrity_tuple_size(bi);

	if (cc->aead) {
		if (cc->tag_size <= cc->stored_iv_size)
			return lbs_reject(ti, "Integrity tag size leaves no room for the tag",
					  "integrity:%u holds the %u-byte random IV and leaves no byte for the authentication tag",
					  cc->tag_size, cc->stored_iv_size);
		cc->auth_size = cc->tag_size - cc->stored_iv_size;
		r = crypto_aead_setauthsize(cc->aead, cc->auth_size);
		if (r)
			return lbs_reject(ti, "Integrity AEAD auth tag size is not supported",
					  "cipher %s: no %u-byte tag (integrity:%u less the %u-byte stored IV)",
					  cc->cipher_string, cc->auth_size,
					  cc->tag_size, cc->stored_iv_size);
	}
	if (cc->auth_size + cc->stored_iv_size > cc->tuple_size)
		return lbs_reject(ti, "Not enough space for integrity tag in the profile",
				  "device %s keeps %u metadata bytes per sector; tag and IV need %u",
				  dev, cc->tuple_size,
				  cc->auth_size + cc->stored_iv_size);

	n = max(1U, LBS_TAG_POOL_ENTRY / cc->tuple_size);
	/*
	 * On a zoned device an entry bounds the queue's max_hw_sectors
	 * (lbs_io_hints()), which the block layer refuses below a page: an
	 * entry covers at least a page of sectors there.
	 */
	if (cc->write_inline)
		n = max_t(unsigned int, n, PAGE_SIZE / cc->sector_size);
	r = mempool_init_kmalloc_pool(&cc->tag_pool, LBS_MIN_IOS,
				      n * cc->tuple_size);
	if (r) {
		ti->error = "Cannot allocate the integrity metadata pool";
		return r;
	}
	cc->tag_pool_sectors = n << cc->sector_shift;
	return 0;
}

/* Safe on a zeroed config. */
void lbs_integrity_exit(struct lbs_config *cc)
{
	mempool_exit(&cc->tag_pool);
	kfree(cc->integrity_type);
	cc->integrity_type = NULL;
}

/*
 * lbs_map(): the bio's metadata buffer, if memory gives it at once; else
 * the bio is cut to one pool entry, and the entry is waited for; where the
 * context may not sleep, io->tags stays NULL and io_wq waits for it.
 * A bio the target may not cut (lbs_bio_whole()) is bounded to one pool
 * entry by lbs_io_hints().  False (the bio is failed) if one is larger all
 * the same.
 */
bool lbs_integrity_map(struct lbs_io *io, struct bio *bio)
{
	struct lbs_config *cc = io->cc;
	size_t len;

	io->tags = NULL;
	io->tags_from_pool = false;
	if (!cc->tuple_size)
		return true;
	len = (size_t)cc->tuple_size * (bio_sectors(bio) >> cc->sector_shift);
	if (len <= KMALLOC_MAX_SIZE)
		io->tags = kmalloc(len, GFP_NOWAIT | __GFP_NORETRY |
				   __GFP_NOMEMALLOC | __GFP_NOWARN);
	if (io->tags)
		return true;
	if (bio_sectors(bio) > cc->tag_pool_sectors) {
		if (lbs_bio_whole(cc, bio)) {
			DMERR_LIMIT("%s of %u sectors: unsplittable, over a tag pool entry's %u",
				    lbs_bio_atomic(bio) ? "atomic write" :
				    "zoned write", bio_sectors(bio),
				    cc->tag_pool_sectors);
			return false;
		}
		dm_accept_partial_bio(bio, cc->tag_pool_sectors);
	}
	io->tags = mempool_alloc(&cc->tag_pool, GFP_NOWAIT | __GFP_NOWARN);
	if (!io->tags && in_task() && !irqs_disabled())
		io->tags = mempool_alloc(&cc->tag_pool, GFP_NOIO);
	io->tags_from_pool = true;
	return true;
}

/* io_wq: the pool entry lbs_map() could not wait for.  Never fails. */
void lbs_integrity_wait(struct lbs_io *io)
{
	if (io->tags)
		return;
	io->tags = mempool_alloc(&io->cc->tag_pool, GFP_NOIO);
	io->tags_from_pool = true;
}

void lbs_integrity_free(struct lbs_io *io)
{
	if (!io->tags)
		return;
	if (io->tags_from_pool)
		mempool_free(io->tags, &io->cc->tag_pool);
	else
		kfree(io->tags);
	io->tags = NULL;
}

/* Give a clone going to the backing device the bio's metadata buffer. */
int lbs_integrity_attach(struct lbs_io *io, struct bio *clone, gfp_t gfp)
{
	struct lbs_config *cc = io->cc;
	struct bio_integrity_payload *bip;
	unsigned int len;

	bip = bio_integrity_alloc(clone, gfp, 1);
	if (IS_ERR_OR_NULL(bip))
		return -ENOMEM;
	len = cc->tuple_size * (bio_sectors(clone) >> cc->sector_shift);
	bip->bip_iter.bi_sector = clone->bi_iter.bi_sector;
	if (bio_integrity_add_page(clone, virt_to_page(io->tags), len,
				   offset_in_page(io->tags)) != len)
		return -EIO;
	return 0;
}

/* The next sector's tuple; a write zeroes what tag and IV leave free. */
void lbs_integrity_sector(struct lbs_io *io, struct lbs_req *lr, bool write)
{
	struct lbs_config *cc = io->cc;
	unsigned int used = cc->auth_size + cc->stored_iv_size;

	lr->tag = io->tags + (size_t)io->tag_index++ * cc->tuple_size;
	if (write)
		memset(lr->tag + used, 0, cc->tuple_size - used);
}

/*
 * Start one sector's AEAD request.  A write first copies the data into the
 * bounce page and encrypts it there, in place: the submitter's page may
 * change while it is written, and an AEAD that reads the plaintext twice
 * (ccm, generic aegis128) would then seal a tag that no read verifies.
 * dm-crypt encrypts from the bio's page into the bounce page instead; the
 * copy is hardening of this target's own.  A read decrypts in place.  Returns what the cipher
 * returns, or the IV mode's error.
 */
int lbs_aead_crypt(struct lbs_io *io, struct aead_request *req,
		   struct lbs_req *lr, bool write, u32 flags)
{
	struct lbs_config *cc = io->cc;
	struct scatterlist *sg = lr->sg_aead;
	unsigned int ss = cc->sector_size;
	u8 *iv = lbs_req_iv(cc, lr), *org_iv = lbs_req_org_iv(cc, lr);
	__le64 *ad = lbs_req_ad(cc, lr);
	int r;

	if (cc->iv_ops) {
		r = lbs_make_iv(cc, lr, org_iv, write);
		if (r)
			return r;
	} else {
		memset(org_iv, 0, cc->iv_size);
	}
	/* the mapping-relative sector, without iv_offset, as dm-crypt */
	*ad = cpu_to_le64(io->sector);
	/* the cipher may change its IV; the associated data keeps the original */
	memcpy(iv, org_iv, cc->iv_size);
	/* a sector lies within one page of each buffer (lbs_convert()) */
	if (write)
		memcpy_page(sg_page(&lr->sg_out), lr->sg_out.offset,
			    sg_page(&lr->sg_in), lr->sg_in.offset, ss);

	/* in place: sector, IV, the data, the tag */
	sg_init_table(sg, 4);
	sg_set_buf(&sg[0], ad, sizeof(*ad));
	sg_set_buf(&sg[1], org_iv, cc->iv_size);
	sg_set_page(&sg[2], sg_page(&lr->sg_out), ss, lr->sg_out.offset);
	sg_set_buf(&sg[3], lr->tag, cc->auth_size);

	aead_request_set_tfm(req, cc->aead);
	aead_request_set_callback(req, flags, lbs_crypt_done, lr);
	aead_request_set_ad(req, sizeof(*ad) + cc->iv_size);
	aead_request_set_crypt(req, sg, sg, write ? ss : ss + cc->auth_size,
			       iv);
	return write ? crypto_aead_encrypt(req) : crypto_aead_decrypt(req);
}
