// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: how a refused table is reported.  Every part of the
 * constructor (target.c, the parser in table.c, the IV modes, integrity)
 * reports through here rather than through its caller.  The parts still
 * call one another both ways in two places: table.c hands the IV mode to
 * iv.c and the integrity options to integrity.c, while integrity.c reads
 * its numbers with table.c's lbs_parse_u64() and iv.c asks integrity.c for
 * the cipher's block size (lbs_cipher_blocksize()).
 */

#include <linux/device-mapper.h>
#include <linux/printk.h>
#include <linux/stdarg.h>

#include "dm-crypt-lbs.h"

/*
 * Refuse a table.  ti->error outlives the constructor (which frees its
 * config) and is logged by dm core, so only a static string goes there; the
 * detail, with the value as written, is logged here, once.
 */
int lbs_reject(struct dm_target *ti, char *error, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	DMERR("%pV", &vaf);
	va_end(args);
	ti->error = error;
	return -EINVAL;
}
