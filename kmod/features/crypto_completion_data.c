// SPDX-License-Identifier: GPL-2.0-only
/* A crypto completion gets the request's data pointer (6.3; the request before). */
#include <linux/build_bug.h>
#include <linux/crypto.h>

static_assert(__same_type(crypto_completion_t, void (*)(void *, int)),
	      "crypto_completion_t takes a struct crypto_async_request");
