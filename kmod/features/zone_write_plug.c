// SPDX-License-Identifier: GPL-2.0-only
/*
 * Zone write plugging (6.10; not 6.1): the block layer orders zoned writes
 * itself, and dm core cuts a zoned write to the queue limits before a target
 * sees it.
 */
#include <linux/blkdev.h>

static bool (*const lbs_test_plug)(struct bio *, unsigned int) =
	blk_zone_plug_bio;
