// SPDX-License-Identifier: GPL-2.0-only
/* struct blk_integrity names its checksum in csum_type (6.11; a profile before). */
#include <linux/blkdev.h>
#include <linux/blk-integrity.h>

static const struct blk_integrity lbs_test __maybe_unused = {
	.csum_type = BLK_INTEGRITY_CSUM_NONE,
};
