// SPDX-License-Identifier: GPL-2.0-only
/* The AES library's encryption-only key: struct aes_enckey, aes_prepareenckey() (7.2). */
#include <linux/build_bug.h>
#include <crypto/aes.h>

static_assert(__same_type(&aes_prepareenckey,
			  int (*)(struct aes_enckey *, const u8 *, size_t)),
	      "aes_prepareenckey() is not what elephant uses");

static inline void lbs_test(const struct aes_enckey *key, u8 *out, const u8 *in)
{
	aes_encrypt(key, out, in);
}
