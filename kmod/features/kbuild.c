// SPDX-License-Identifier: GPL-2.0-only
/* The check of the checks: kernel headers compile with these flags at all. */
#include <linux/module.h>
#include <linux/blkdev.h>
#include <crypto/hash.h>
