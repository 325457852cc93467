// SPDX-License-Identifier: GPL-2.0-only
/* hex2bin() is declared in <linux/hex.h> (6.12; <linux/kernel.h> on 6.1). */
#include <linux/build_bug.h>
#include <linux/hex.h>

static_assert(__same_type(&hex2bin, int (*)(u8 *, const char *, size_t)),
	      "hex2bin() is not what table.c calls");
