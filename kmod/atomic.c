// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: encryption sectors the device writes whole.
 *
 * A power failure while a sector larger than the device's atomic unit is
 * written can leave it torn: partly old, partly new (dm-crypt-lbs.rst, "Torn
 * writes").  Where the kernel has atomic writes (REQ_ATOMIC, 6.11 on) and the
 * device writes a whole encryption sector atomically, every write is cut here
 * into pieces the device takes as atomic writes: a power of two of whole
 * sectors, aligned to its own size on the disk (so it crosses no atomic
 * boundary), within the device's atomic unit, its boundary and the segments
 * it takes, and within the request cap (io.c).  The block layer fails, never
 * splits, an atomic write that does not fit, so each piece is made to fit
 * before it is sent.
 */

#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/device-mapper.h>
#include <linux/log2.h>

#include "dm-crypt-lbs.h"

/*
 * Set cc->atomic_unit: the largest atomic piece, in bytes, the device takes
 * for this mapping, or 0 when it cannot take one whole encryption sector
 * (then no write is sent as atomic).  Not on a zoned device (its writes are
 * never cut) nor with integrity metadata (dm-integrity has no atomic writes).
 */
void lbs_atomic_ctr(struct lbs_config *cc)
{
	struct block_device *bdev = cc->dev->bdev;
	struct lbs_atomic_limits lim;
	unsigned int unit;
	sector_t base;

	cc->atomic_unit = 0;
	if (cc->write_inline || cc->tuple_size ||
	    !lbs_bdev_atomic_limits(bdev, &lim) ||
	    cc->sector_size < lim.unit_min)
		return;
	unit = min(lim.unit_max, lim.seg_bytes);
	if (lim.boundary)
		unit = min(unit, lim.boundary);
	if (unit < cc->sector_size)
		return;
	unit = rounddown_pow_of_two(unit);
	/* the mapping's first sector on the whole disk must be aligned */
	base = get_start_sect(bdev) + cc->start;
	if (base & ((cc->sector_size >> SECTOR_SHIFT) - 1))
		return;
	cc->atomic_unit = unit;
}

/*
 * The 512-byte sectors of the atomic piece a write at target offset @offset
 * starts with: the largest power of two, at least one encryption sector and
 * at most the bio, whose start on the disk is aligned to its size.
 */
unsigned int lbs_atomic_sectors(struct lbs_config *cc, struct bio *bio,
				sector_t offset)
{
	sector_t pos = get_start_sect(cc->dev->bdev) + cc->start + offset;
	unsigned int min_sectors = cc->sector_size >> SECTOR_SHIFT;
	unsigned int n = cc->atomic_unit >> SECTOR_SHIFT;

	while (n > min_sectors && (n > bio_sectors(bio) || (pos & (n - 1))))
		n >>= 1;
	return n;
}
