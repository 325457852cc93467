// SPDX-License-Identifier: GPL-2.0-only
/* bioset_integrity_create() reserves a bio_set's integrity payloads (gone in 7.2). */
#include <linux/build_bug.h>
#include <linux/bio.h>
#include <linux/blk-integrity.h>

static_assert(__same_type(&bioset_integrity_create,
			  int (*)(struct bio_set *, int)),
	      "bioset_integrity_create() is not what io.c calls");
