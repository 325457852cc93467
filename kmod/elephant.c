// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: the "elephant" IV mode, BitLocker's AES-CBC with the
 * Elephant diffuser (Niels Ferguson, "AES-CBC + Elephant diffuser: A Disk
 * Encryption Algorithm for Windows Vista", Microsoft, 2006).
 *
 * The key has two halves of equal size: the first is the CBC key, the
 * second the sector-key key Ks (AES-128, -192 or -256).  For the sector at
 * byte offset o (iv_sector times sector_size, as eboiv):
 *
 *   sector key  K(o) = AES(Ks, e) || AES(Ks, e'), where e is o as a 64-bit
 *               little-endian number in a zeroed 16-byte block and e' is e
 *               with its last byte set to 0x80;
 *   encryption  P xor K(o) (repeated over the sector), then the inverse of
 *               diffuser A, then the inverse of diffuser B, then AES-CBC
 *               with the eboiv IV;
 *   decryption  AES-CBC, diffuser B, diffuser A, xor K(o).
 *
 * The diffusers work on the sector as n little-endian 32-bit words, indices
 * taken modulo n.  Diffuser A runs 5 cycles of, for i = 0 .. n-1,
 *     d[i] += d[i-2] ^ rol(d[i-5], RA[i mod 4]),  RA = { 9, 0, 13, 0 };
 * diffuser B 3 cycles of
 *     d[i] += d[i+2] ^ rol(d[i+5], RB[i mod 4]),  RB = { 0, 10, 0, 25 }.
 * Their inverses run each cycle from i = n-1 down to 0 and subtract.  The
 * definition holds for any sector of at least 8 words; sector sizes are
 * powers of two here, so the modulo is a mask.
 *
 * Writes: gen() copies the plaintext to the bounce buffer, transforms it
 * there and points the request's source at it, so the cipher encrypts the
 * bounce buffer in place.  Reads: post() transforms the decrypted data in
 * place.  Neither sleeps: the sector key comes from the AES library, so
 * post() may run in a crypto driver's completion.
 */

#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <crypto/aes.h>
#include <crypto/algapi.h>

#include "dm-crypt-lbs.h"

#define LBS_ELEPHANT_KEY	(2 * AES_BLOCK_SIZE)	/* the sector key */

static const u8 lbs_diffuser_a_rot[4] = { 9, 0, 13, 0 };
static const u8 lbs_diffuser_b_rot[4] = { 0, 10, 0, 25 };

/*
 * One diffuser as the paper defines it (the decryption direction):
 * d[i] += d[i + o1] ^ rol(d[i + o2], rot[i mod 4]), indices modulo n.
 */
static void lbs_diffuse(u32 *d, unsigned int n, unsigned int cycles,
			int o1, int o2, const u8 *rot)
{
	unsigned int m = n - 1, c, i;

	for (c = 0; c < cycles; c++)
		for (i = 0; i < n; i++)
			d[i] += d[(i + o1) & m] ^
				rol32(d[(i + o2) & m], rot[i & 3]);
}

/* Its inverse (the encryption direction): the same steps, undone. */
static void lbs_undiffuse(u32 *d, unsigned int n, unsigned int cycles,
			  int o1, int o2, const u8 *rot)
{
	unsigned int m = n - 1, c, i;

	for (c = 0; c < cycles; c++)
		for (i = n; i-- > 0;)
			d[i] -= d[(i + o1) & m] ^
				rol32(d[(i + o2) & m], rot[i & 3]);
}

/* The sector key K(o) of the sector lr is for. */
static void lbs_elephant_sector_key(struct lbs_config *cc,
				    struct lbs_req *lr, u8 *key)
{
	u8 e[AES_BLOCK_SIZE] = { 0 };

	put_unaligned_le64(lr->iv_sector * cc->sector_size, e);
	lbs_aes_encrypt(cc->iv_aes, key, e);
	e[AES_BLOCK_SIZE - 1] = 0x80;
	lbs_aes_encrypt(cc->iv_aes, key + AES_BLOCK_SIZE, e);
	memzero_explicit(e, sizeof(e));
}

/*
 * Transform one sector of data in place: before encryption (write) or after
 * decryption (read).
 */
static void lbs_elephant(struct lbs_config *cc, struct lbs_req *lr, u8 *data,
			 bool write)
{
	unsigned int n = cc->sector_size / sizeof(u32), i;
	u32 *d = (u32 *)data;
	u8 key[LBS_ELEPHANT_KEY];

	lbs_elephant_sector_key(cc, lr, key);
	if (!write) {
		le32_to_cpu_array(d, n);
		lbs_diffuse(d, n, 3, 2, 5, lbs_diffuser_b_rot);
		lbs_diffuse(d, n, 5, -2, -5, lbs_diffuser_a_rot);
		cpu_to_le32_array(d, n);
	}
	for (i = 0; i < cc->sector_size; i += LBS_ELEPHANT_KEY)
		crypto_xor(data + i, key, LBS_ELEPHANT_KEY);
	if (write) {
		le32_to_cpu_array(d, n);
		lbs_undiffuse(d, n, 5, -2, -5, lbs_diffuser_a_rot);
		lbs_undiffuse(d, n, 3, 2, 5, lbs_diffuser_b_rot);
		cpu_to_le32_array(d, n);
	}
	memzero_explicit(key, sizeof(key));
}

int lbs_elephant_ctr(struct lbs_config *cc, struct dm_target *ti,
		     const char *opts)
{
	unsigned int half = cc->key_size / 2;
	int r;

	if (half != AES_KEYSIZE_128 && half != AES_KEYSIZE_192 &&
	    half != AES_KEYSIZE_256)
		return lbs_reject(ti, "elephant: key is not two AES keys",
				  "elephant: key of %u bytes; it is the CBC key and the sector-key key, 16, 24 or 32 bytes each",
				  cc->key_size);
	r = lbs_iv_eboiv_ctr(cc, ti, opts);
	if (r)
		return r;
	cc->iv_aes = lbs_aes_key_alloc();
	if (!cc->iv_aes) {
		ti->error = "Cannot allocate the elephant sector-key key";
		return -ENOMEM;
	}
	cc->key_extra_size = half;
	cc->key_parts = 2;
	return 0;
}

/* Ks is the second half of the key. */
int lbs_elephant_init(struct lbs_config *cc)
{
	return lbs_aes_setkey(cc->iv_aes, cc->key + cc->key_size -
			      cc->key_extra_size, cc->key_extra_size);
}

int lbs_elephant_gen(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	if (bio_data_dir(lr->io->base) == WRITE) {
		u8 *in = lbs_map_sector(&lr->sg_in);
		u8 *out = lbs_map_sector(&lr->sg_out);

		memcpy(out, in, cc->sector_size);
		lbs_elephant(cc, lr, out, true);
		lbs_unmap_sector(out, &lr->sg_out);
		lbs_unmap_sector(in, &lr->sg_in);
		/* the cipher encrypts the transformed copy, in place */
		sg_set_page(&lr->sg_in, sg_page(&lr->sg_out), cc->sector_size,
			    lr->sg_out.offset);
	}
	return lbs_iv_eboiv_gen(cc, iv, lr);
}

int lbs_elephant_post(struct lbs_config *cc, u8 *iv, struct lbs_req *lr)
{
	u8 *data;

	if (bio_data_dir(lr->io->base) == WRITE)
		return 0;
	data = lbs_map_sector(&lr->sg_out);
	lbs_elephant(cc, lr, data, false);
	lbs_unmap_sector(data, &lr->sg_out);
	return 0;
}
