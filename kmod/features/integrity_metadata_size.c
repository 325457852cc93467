// SPDX-License-Identifier: GPL-2.0-only
/* struct blk_integrity's bytes per interval are metadata_size (tuple_size before). */
#include <linux/blkdev.h>
#include <linux/blk-integrity.h>

static const struct blk_integrity lbs_test __maybe_unused = {
	.metadata_size = 8,
};
