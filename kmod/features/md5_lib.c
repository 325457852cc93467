// SPDX-License-Identifier: GPL-2.0-only
/* The MD5 library: md5_init(), md5_update() and struct md5_ctx's chaining words. */
#include <linux/build_bug.h>
#include <crypto/md5.h>

static_assert(__same_type(&md5_init, void (*)(struct md5_ctx *)),
	      "md5_init() is not what lmk calls");
static_assert(__same_type(&md5_update,
			  void (*)(struct md5_ctx *, const u8 *, size_t)),
	      "md5_update() is not what lmk calls");
static_assert(sizeof_field(struct md5_ctx, state.h) == MD5_DIGEST_SIZE,
	      "struct md5_ctx has no chaining words in state.h");
