// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: IV generators.  Each produces, for one encryption sector,
 * exactly the IV dm-crypt produces, so the ciphertext is the same.
 *
 * lr->iv_sector is the sector number the IV is built from: in 512-byte
 * units, or in sector_size units with iv_large_sectors; iv_offset included.
 *
 *   plain      low 32 bits of the sector number, little-endian, zero padded
 *   plain64    64-bit little-endian sector number, zero padded
 *   plain64be  64-bit big-endian sector number in the last eight bytes
 *   essiv      plain64; the essiv(...) crypto template encrypts it with a
 *              key hashed from the volume key
 *   benbi      big-endian count of cipher blocks (narrow blocks) from 1,
 *              in the last eight bytes
 *   null       all zero
 *   eboiv      the byte offset (sector number times sector_size) as a
 *              little-endian block, encrypted with the volume key
 *   lmk        loop-AES: the MD5 state (unfinished, no padding) after an
 *              optional 64-byte seed block, bytes 16..511 of the plaintext
 *              and a 16-byte sector block; reads decrypt with a zero IV and
 *              then XOR the IV, made from the decrypted data, into the first
 *              16 bytes.  512-byte sectors only.
 *   tcw        TrueCrypt CBC: a seed XORed with the sector number, plus
 *              "whitening": 8 bytes made from a second seed, the sector
 *              number and CRC32, XORed over the whole ciphertext.  512-byte
 *              sectors only.
 *   elephant   BitLocker's AES-CBC with the Elephant diffuser: eboiv, and
 *              the sector transformed before encryption and after
 *              decryption (elephant.c).
 *   random     random bytes for every sector written, kept in the
 *              integrity metadata after the tag and read back from there
 *              (integrity.c); only over a device with integrity metadata.
 * lmk's seed, tcw's seeds and elephant's sector-key key are the key bytes
 * after the cipher keys.
 */

#include <linux/crc32.h>
#include <linux/fips.h>
#include <linux/highmem.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <crypto/algapi.h>
#include <crypto/hash.h>
#include <crypto/md5.h>

#include "dm-crypt-lbs.h"

static int lbs_iv_plain_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	memset(iv, 0, cc->iv_size);
	put_unaligned_le32(lower_32_bits(lr->iv_sector), iv);
	return 0;
}

static int lbs_iv_plain64_gen(struct lbs_config *cc, u8 *iv,
			      struct lbs_req *lr)
{
	lbs_iv_put_plain64(cc, iv, lr->iv_sector);
	return 0;
}

static int lbs_iv_plain64be_gen(struct lbs_config *cc, u8 *iv,
				struct lbs_req *lr)
{
	memset(iv, 0, cc->iv_size);
	put_unaligned_be64(lr->iv_sector, iv + cc->iv_size - sizeof(u64));
	return 0;
}

static int lbs_iv_benbi_ctr(struct lbs_config *cc, struct dm_target *ti,
			    const char *opts)
{
	unsigned int bs = lbs_cipher_blocksize(cc);

	if (!is_power_of_2(bs) || bs > LBS_MIN_SECTOR_SIZE)
		return lbs_reject(ti, "benbi: cipher block size unusable",
				  "benbi: cipher block size %u is not a power of two up to 512",
				  bs);
	cc->benbi_shift = SECTOR_SHIFT - ilog2(bs);
	return 0;
}

static int lbs_iv_benbi_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	memset(iv, 0, cc->iv_size);
	put_unaligned_be64((lr->iv_sector << cc->benbi_shift) + 1,
			   iv + cc->iv_size - sizeof(u64));
	return 0;
}

static int lbs_iv_null_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	memset(iv, 0, cc->iv_size);
	return 0;
}

/* Writes only: a read takes the IV stored in the metadata. */
static int lbs_iv_random_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	get_random_bytes(iv, cc->iv_size);
	return 0;
}

int lbs_iv_eboiv_ctr(struct lbs_config *cc, struct dm_target *ti,
		     const char *opts)
{
	unsigned int bs = crypto_skcipher_blocksize(cc->tfms[0]);

	if (bs != cc->iv_size)
		return lbs_reject(ti, "eboiv: cipher block size differs from its IV size",
				  "eboiv: cipher block size %u differs from its IV size %u",
				  bs, cc->iv_size);
	return 0;
}

/* The eboiv input block, placed after the scratch request. */
static u8 *lbs_eboiv_block(struct lbs_config *cc, struct skcipher_request *req)
{
	u8 *p = (u8 *)req + sizeof(*req) + crypto_skcipher_reqsize(cc->tfms[0]);

	return PTR_ALIGN(p, crypto_skcipher_alignmask(cc->tfms[0]) + 1);
}

/*
 * Encrypting one zero block in the chaining mode with the byte offset as IV
 * gives E(offset), as dm-crypt computes it.  Sleeps while the cipher works.
 */
int lbs_iv_eboiv_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	struct skcipher_request *req = lbs_req_scratch(cc, lr);
	u8 *block = lbs_eboiv_block(cc, req);
	struct scatterlist src, dst;
	DECLARE_CRYPTO_WAIT(wait);

	memset(block, 0, cc->iv_size);
	put_unaligned_le64(lr->iv_sector * cc->sector_size, block);
	sg_init_one(&src, page_address(ZERO_PAGE(0)), cc->iv_size);
	sg_init_one(&dst, iv, cc->iv_size);
	skcipher_request_set_tfm(req, cc->tfms[0]);
	skcipher_request_set_callback(req, CRYPTO_TFM_REQ_MAY_BACKLOG |
				      CRYPTO_TFM_REQ_MAY_SLEEP,
				      crypto_req_done, &wait);
	skcipher_request_set_crypt(req, &src, &dst, cc->iv_size, block);
	return crypto_wait_req(crypto_skcipher_encrypt(req), &wait);
}

unsigned int lbs_iv_scratch_size(struct lbs_config *cc)
{
	if (!cc->iv_ops || !cc->iv_ops->needs_scratch)
		return 0;
	return sizeof(struct skcipher_request) +
	       crypto_skcipher_reqsize(cc->tfms[0]) +
	       crypto_skcipher_alignmask(cc->tfms[0]) + cc->iv_size;
}

/* The modes that work on their own key bytes: lmk and tcw */

#define LBS_LMK_SEED_SIZE	64	/* one MD5 block */
#define LBS_TCW_WHITENING	16

static bool lbs_lr_write(struct lbs_req *lr)
{
	return bio_data_dir(lr->io->base) == WRITE;
}

/* The shash a 512-byte-sector mode hashes with, as cc->iv_hash. */
static int lbs_iv_hash_alloc(struct lbs_config *cc, struct dm_target *ti,
			     const char *mode, const char *hash)
{
	int r;

	cc->iv_hash = crypto_alloc_shash(hash, 0, CRYPTO_ALG_ALLOCATES_MEMORY);
	if (!IS_ERR(cc->iv_hash))
		return 0;
	r = PTR_ERR(cc->iv_hash);
	cc->iv_hash = NULL;
	DMERR("IV mode %s: this kernel has no %s (%d)", mode, hash, r);
	ti->error = "IV mode's hash not available in this kernel";
	return r == -ENOENT ? -EINVAL : r;
}

/*
 * A 512-byte-sector mode with a keyed hash: the common part of its ctr.
 * hash names the shash to allocate; NULL for none (tcw's CRC32 and lmk on
 * the MD5 library are plain library calls).
 */
static int lbs_iv_hash_ctr(struct lbs_config *cc, struct dm_target *ti,
			   const char *mode, const char *hash,
			   unsigned int seed_size)
{
	int r;

	if (cc->sector_size != LBS_MIN_SECTOR_SIZE)
		return lbs_reject(ti, "IV mode lmk/tcw takes 512-byte sectors only",
				  "IV mode %s: sector_size %u; its format defines 512-byte sectors only",
				  mode, cc->sector_size);
	if (hash) {
		r = lbs_iv_hash_alloc(cc, ti, mode, hash);
		if (r)
			return r;
	}
	cc->iv_seed = kzalloc(seed_size, GFP_KERNEL);
	if (!cc->iv_seed) {
		ti->error = "Cannot allocate the IV mode's seed";
		return -ENOMEM;
	}
	return 0;
}

static int lbs_iv_lmk_ctr(struct lbs_config *cc, struct dm_target *ti,
			  const char *opts)
{
	const char *why;
	int r;

	/*
	 * A read decrypts with a zero IV and XORs the real one into the first
	 * block afterwards: that recovers CBC's plaintext and no other mode's.
	 * dm-crypt loads lmk over xts or lrw and writes what it cannot read.
	 */
	if (!strstarts(crypto_tfm_alg_name(crypto_skcipher_tfm(cc->tfms[0])),
		       "cbc("))
		return lbs_reject(ti, "lmk: loop-AES is defined over CBC only",
				  "lmk: cipher %s; loop-AES is defined over CBC, and data written with another mode cannot be read back",
				  crypto_tfm_alg_name(crypto_skcipher_tfm(cc->tfms[0])));
	/*
	 * MD5 has no place in FIPS mode.  Where lmk hashes through the "md5"
	 * shash the crypto API refuses it there; the MD5 library (7.2) does
	 * not, so refuse it here on every kernel, as dm-crypt does on 7.x.
	 */
	if (fips_enabled)
		return lbs_reject(ti, "lmk: MD5 is not allowed in FIPS mode",
				  "lmk: refused in FIPS mode (fips=1): loop-AES's IV is MD5");
	r = lbs_iv_hash_ctr(cc, ti, "lmk", LBS_MD5_SHASH, LBS_LMK_SEED_SIZE);
	if (r)
		return r;
	why = lbs_md5_check(cc->iv_hash);
	if (why)
		return lbs_reject(ti, "lmk: this kernel's md5 state cannot be read",
				  "lmk: %s", why);
	if (cc->iv_size > MD5_DIGEST_SIZE)
		return lbs_reject(ti, "lmk: the cipher's IV is longer than MD5's state",
				  "lmk: IV of %u bytes, MD5 gives %u",
				  cc->iv_size, MD5_DIGEST_SIZE);
	/* a key of one part more than the key count: the last is the seed */
	if (cc->key_size % cc->tfms_count) {
		cc->key_parts = cc->tfms_count + 1;
		cc->key_extra_size = cc->key_size / cc->key_parts;
	}
	return 0;
}

/* lmk: the seed is the part after the cipher keys, its first 16 bytes */
static int lbs_iv_lmk_init(struct lbs_config *cc)
{
	unsigned int n = min_t(unsigned int, cc->key_extra_size,
			       MD5_DIGEST_SIZE);

	memset(cc->iv_seed, 0, LBS_LMK_SEED_SIZE);
	memcpy(cc->iv_seed, cc->key + cc->key_size - cc->key_extra_size, n);
	return 0;
}

/* lmk's IV of one 512-byte plaintext sector. */
static int lbs_iv_lmk_one(struct lbs_config *cc, u8 *iv, struct lbs_req *lr,
			  const u8 *data)
{
	__le32 block[4];
	const struct lbs_md5_part parts[] = {
		{ cc->iv_seed, LBS_LMK_SEED_SIZE },
		{ data + 16, LBS_MIN_SECTOR_SIZE - 16 },
		{ block, sizeof(block) },
	};
	/* without a seed part the key has none: MD5 starts on the data */
	unsigned int first = cc->key_extra_size ? 0 : 1;
	u32 words[MD5_HASH_WORDS];
	u8 state[MD5_DIGEST_SIZE];
	int i, r;

	/* the sector number, cut to 56 bits, with loop-AES's constants */
	block[0] = cpu_to_le32(lower_32_bits(lr->iv_sector));
	block[1] = cpu_to_le32((upper_32_bits(lr->iv_sector) & 0x00ffffff) |
			       0x80000000);
	block[2] = cpu_to_le32(4024);
	block[3] = 0;
	/* the state as it stands: no MD5 padding, no length */
	r = lbs_md5_words(cc->iv_hash, parts + first, ARRAY_SIZE(parts) - first,
			  words);
	if (r)
		return r;
	/* the IV is the state's first iv_size bytes (8 for 64-bit ciphers) */
	for (i = 0; i < MD5_HASH_WORDS; i++)
		put_unaligned_le32(words[i], state + 4 * i);
	memcpy(iv, state, cc->iv_size);
	memzero_explicit(state, sizeof(state));
	memzero_explicit(words, sizeof(words));
	return 0;
}

static int lbs_iv_lmk_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	u8 *data;
	int r;

	memset(iv, 0, cc->iv_size);
	if (!lbs_lr_write(lr))
		return 0;	/* made from the plaintext, in post */
	data = lbs_map_sector(&lr->sg_in);
	r = lbs_iv_lmk_one(cc, iv, lr, data);
	lbs_unmap_sector(data, &lr->sg_in);
	return r;
}

static int lbs_iv_lmk_post(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	u8 *data;
	int r;

	if (lbs_lr_write(lr))
		return 0;
	data = lbs_map_sector(&lr->sg_out);
	r = lbs_iv_lmk_one(cc, iv, lr, data);
	if (!r)
		crypto_xor(data, iv, cc->iv_size);
	lbs_unmap_sector(data, &lr->sg_out);
	return r;
}

static int lbs_iv_tcw_ctr(struct lbs_config *cc, struct dm_target *ti,
			  const char *opts)
{
	int r;

	r = lbs_iv_hash_ctr(cc, ti, "tcw", NULL,
			    cc->iv_size + LBS_TCW_WHITENING);
	if (r)
		return r;
	/* TrueCrypt's blocks: 64 bits (CAST5, Blowfish, 3DES) or 128 */
	if (cc->iv_size != 8 && cc->iv_size != 16)
		return lbs_reject(ti, "tcw: the cipher's IV is neither 8 nor 16 bytes",
				  "tcw: IV of %u bytes; TrueCrypt's ciphers have 8 or 16",
				  cc->iv_size);
	cc->key_extra_size = cc->iv_size + LBS_TCW_WHITENING;
	cc->key_parts = cc->tfms_count + 2;
	if (cc->key_size <= cc->key_extra_size)
		return lbs_reject(ti, "tcw: key too short for the seeds",
				  "tcw: key of %u bytes; it needs the cipher's key, %u IV seed bytes and %u whitening bytes",
				  cc->key_size, cc->iv_size, LBS_TCW_WHITENING);
	return 0;
}

/* tcw: the IV seed, then the whitening seed, after the cipher keys */
static int lbs_iv_tcw_init(struct lbs_config *cc)
{
	memcpy(cc->iv_seed, cc->key + cc->key_size - cc->key_extra_size,
	       cc->key_extra_size);
	return 0;
}

/* XOR the sector's 8-byte whitening over one 512-byte sector of ciphertext. */
static int lbs_iv_tcw_whiten(struct lbs_config *cc, struct lbs_req *lr,
			     u8 *data)
{
	u8 w[LBS_TCW_WHITENING], sector[8];
	int i;

	put_unaligned_le64(lr->iv_sector, sector);
	crypto_xor_cpy(w, cc->iv_seed + cc->iv_size, sector, 8);
	crypto_xor_cpy(w + 8, cc->iv_seed + cc->iv_size + 8, sector, 8);
	/*
	 * each 32-bit word replaced by its CRC32 (seed 0, no final inversion,
	 * stored little-endian), then folded to 8 bytes
	 */
	for (i = 0; i < 4; i++)
		put_unaligned_le32(crc32_le(0, w + 4 * i, 4), w + 4 * i);
	crypto_xor(w, w + 12, 4);
	crypto_xor(w + 4, w + 8, 4);
	for (i = 0; i < LBS_MIN_SECTOR_SIZE; i += 8)
		crypto_xor(data + i, w, 8);
	memzero_explicit(w, sizeof(w));
	return 0;
}

static int lbs_iv_tcw_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	u8 sector[8];
	int r = 0;

	if (!lbs_lr_write(lr)) {
		/* reads decrypt in place: unwhiten the ciphertext first */
		u8 *data = lbs_map_sector(&lr->sg_in);

		r = lbs_iv_tcw_whiten(cc, lr, data);
		lbs_unmap_sector(data, &lr->sg_in);
	}
	/* each 8-byte half of the IV: the seed's half XOR the sector number */
	put_unaligned_le64(lr->iv_sector, sector);
	crypto_xor_cpy(iv, cc->iv_seed, sector, 8);
	if (cc->iv_size == 16)
		crypto_xor_cpy(iv + 8, cc->iv_seed + 8, sector, 8);
	return r;
}

static int lbs_iv_tcw_post(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	u8 *data;
	int r;

	if (!lbs_lr_write(lr))
		return 0;
	data = lbs_map_sector(&lr->sg_out);
	r = lbs_iv_tcw_whiten(cc, lr, data);
	lbs_unmap_sector(data, &lr->sg_out);
	return r;
}

/* Safe on any config: frees what lmk, tcw and elephant allocated. */
void lbs_iv_dtr(struct lbs_config *cc)
{
	kfree_sensitive(cc->iv_aes);
	cc->iv_aes = NULL;
	if (cc->iv_hash)
		crypto_free_shash(cc->iv_hash);
	cc->iv_hash = NULL;
	kfree_sensitive(cc->iv_seed);
	cc->iv_seed = NULL;
}

static const struct lbs_iv_ops lbs_iv_modes[] = {
	{ .name = "plain", .gen = lbs_iv_plain_gen, .aead_ok = true },
	{ .name = "plain64", .gen = lbs_iv_plain64_gen, .counter64 = true,
	  .aead_ok = true },
	{ .name = "plain64be", .gen = lbs_iv_plain64be_gen, .aead_ok = true },
	{ .name = "essiv", .gen = lbs_iv_plain64_gen, .counter64 = true,
	  .aead_ok = true },
	{ .name = "benbi", .ctr = lbs_iv_benbi_ctr, .gen = lbs_iv_benbi_gen,
	  .aead_ok = true },
	{ .name = "null", .gen = lbs_iv_null_gen, .aead_ok = true },
	{ .name = "random", .gen = lbs_iv_random_gen, .aead_ok = true,
	  .stored = true },
	{ .name = "eboiv", .ctr = lbs_iv_eboiv_ctr, .gen = lbs_iv_eboiv_gen,
	  .needs_scratch = true },
	{ .name = "lmk", .ctr = lbs_iv_lmk_ctr, .init = lbs_iv_lmk_init,
	  .gen = lbs_iv_lmk_gen, .post = lbs_iv_lmk_post },
	{ .name = "tcw", .ctr = lbs_iv_tcw_ctr, .init = lbs_iv_tcw_init,
	  .gen = lbs_iv_tcw_gen, .post = lbs_iv_tcw_post },
	{ .name = "elephant", .ctr = lbs_elephant_ctr,
	  .init = lbs_elephant_init, .gen = lbs_elephant_gen,
	  .post = lbs_elephant_post, .needs_scratch = true },
};

int lbs_iv_lookup(struct dm_target *ti, struct lbs_config *cc,
		  const char *ivmode)
{
	unsigned int i;

	cc->iv_ops = NULL;
	if (!ivmode)
		return 0;
	for (i = 0; i < ARRAY_SIZE(lbs_iv_modes); i++) {
		if (!strcmp(ivmode, lbs_iv_modes[i].name)) {
			cc->iv_ops = &lbs_iv_modes[i];
			return 0;
		}
	}
	return lbs_reject(ti, "Unknown IV mode",
			  "unknown IV mode \"%s\" (plain, plain64, plain64be, essiv:<hash>, benbi, null, eboiv, lmk, tcw, elephant, random)",
			  ivmode);
}
