// SPDX-License-Identifier: GPL-2.0-only
/* <linux/unaligned.h> exists (6.12; <asm/unaligned.h> before). */
#include <linux/unaligned.h>
