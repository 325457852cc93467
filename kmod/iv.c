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
 */

#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/string.h>

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
	unsigned int bs = crypto_skcipher_blocksize(cc->tfms[0]);

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

static int lbs_iv_eboiv_ctr(struct lbs_config *cc, struct dm_target *ti,
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
static int lbs_iv_eboiv_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
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

static const struct lbs_iv_ops lbs_iv_modes[] = {
	{ .name = "plain", .gen = lbs_iv_plain_gen },
	{ .name = "plain64", .gen = lbs_iv_plain64_gen, .counter64 = true },
	{ .name = "plain64be", .gen = lbs_iv_plain64be_gen },
	{ .name = "essiv", .gen = lbs_iv_plain64_gen, .counter64 = true },
	{ .name = "benbi", .ctr = lbs_iv_benbi_ctr, .gen = lbs_iv_benbi_gen },
	{ .name = "null", .gen = lbs_iv_null_gen },
	{ .name = "eboiv", .ctr = lbs_iv_eboiv_ctr, .gen = lbs_iv_eboiv_gen,
	  .needs_scratch = true },
};

/* dm-crypt IV modes this target refuses. */
static const char * const lbs_iv_unsupported[] = {
	"random", "lmk", "tcw", "elephant",
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
	for (i = 0; i < ARRAY_SIZE(lbs_iv_unsupported); i++) {
		if (!strcmp(ivmode, lbs_iv_unsupported[i]))
			return lbs_reject(ti, "IV mode refused by this target",
					  "IV mode %s is not supported by this target",
					  ivmode);
	}
	return lbs_reject(ti, "Unknown IV mode",
			  "unknown IV mode \"%s\" (plain, plain64, plain64be, essiv:<hash>, benbi, null, eboiv)",
			  ivmode);
}
