/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-crypt-lbs: every difference between the kernels this target builds
 * for (6.1 to 6.12 and later) is bridged here and nowhere else.
 */
#ifndef DM_CRYPT_LBS_COMPAT_H
#define DM_CRYPT_LBS_COMPAT_H

#include <linux/blkdev.h>
#include <linux/compiler.h>
#include <linux/crypto.h>
#include <linux/minmax.h>
#include <linux/version.h>

/* Kernel versions this builds for: 6.1 and later. */
#define LBS_KERNEL_AT_LEAST(a, b, c)	(LINUX_VERSION_CODE >= KERNEL_VERSION(a, b, c))

/* The unaligned access helpers moved to linux/ in 6.12. */
#if LBS_KERNEL_AT_LEAST(6, 12, 0)
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
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
#if LBS_KERNEL_AT_LEAST(6, 3, 0)
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

/* Keyring key types that exist only when the kernel config has them. */
#define LBS_HAVE_KEYRING		IS_ENABLED(CONFIG_KEYS)
#define LBS_HAVE_ENCRYPTED_KEYS		IS_ENABLED(CONFIG_ENCRYPTED_KEYS)
#define LBS_HAVE_TRUSTED_KEYS		IS_ENABLED(CONFIG_TRUSTED_KEYS)

#endif /* DM_CRYPT_LBS_COMPAT_H */
