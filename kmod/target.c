// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: a device-mapper target that speaks dm-crypt's "crypt" table
 * format and on-disk format, with an encryption sector (sector_size) of up
 * to min(PAGE_SIZE, BLK_MAX_BLOCK_SIZE) bytes.
 *
 * Table: <cipher> <key> <iv_offset> <device path> <offset>
 *        [<#opt_params> <opt_params>]
 */

#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "dm-crypt-lbs.h"

#define LBS_VERSION_STRING	__stringify(LBS_VERSION_MAJOR) "." \
				__stringify(LBS_VERSION_MINOR) "." \
				__stringify(LBS_VERSION_PATCH)

static char *target_name = "crypt";
module_param(target_name, charp, 0444);
MODULE_PARM_DESC(target_name,
		 "name the target registers as (default \"crypt\"; e.g. crypt_lbs beside the in-tree dm_crypt)");

static void lbs_dtr(struct dm_target *ti)
{
	struct lbs_config *cc = ti->private;

	if (!cc)
		return;
	ti->private = NULL;
	lbs_io_exit(cc);
	lbs_integrity_exit(cc);
	lbs_free_cipher(cc);
	if (cc->dev)
		dm_put_device(ti, cc->dev);
	kfree_sensitive(cc->key_string);
	mutex_destroy(&cc->key_lock);
	kfree_sensitive(cc);
}

static int lbs_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct lbs_config *cc;
	int key_size, r;
	u64 val;

	if (argc < 5)
		return lbs_reject(ti, "Too few arguments for a crypt table",
				  "%u arguments; a crypt table needs <cipher> <key> <iv_offset> <device> <offset> [<#opt_params> <opt_params>]",
				  argc);
	key_size = lbs_key_size(argv[1]);
	if (key_size == -E2BIG)
		return lbs_reject(ti, "Key larger than any cipher takes",
				  "key of more than %u bytes; no cipher takes one",
				  LBS_MAX_KEY_SIZE);
	if (key_size < 0) {
		ti->error = "Key is not even hex digits, \"-\" or :<size>:<type>:<description>";
		return -EINVAL;
	}
	cc = kzalloc(struct_size(cc, key, key_size), GFP_KERNEL);
	if (!cc) {
		ti->error = "Cannot allocate the target";
		return -ENOMEM;
	}
	cc->key_size = key_size;
	cc->sector_size = LBS_MIN_SECTOR_SIZE;
	mutex_init(&cc->key_lock);
	ti->private = cc;

	/* the options first: the IV and key checks depend on sector_size */
	if (argc > 5) {
		r = lbs_parse_options(ti, cc, argc - 5, argv + 5);
		if (r)
			goto bad;
	}
	r = lbs_parse_cipher(ti, cc, argv[0], argv[1]);
	if (r)
		goto bad;

	r = -EINVAL;
	if (lbs_parse_u64(argv[2], &val)) {
		lbs_reject(ti, "iv_offset is not an unsigned decimal number",
			   "iv_offset \"%s\" is not an unsigned decimal number",
			   argv[2]);
		goto bad;
	}
	if (val & ((cc->sector_size >> SECTOR_SHIFT) - 1)) {
		lbs_reject(ti, "iv_offset is not a multiple of sector_size",
			   "iv_offset %s is not a multiple of sector_size %u (%u sectors)",
			   argv[2], cc->sector_size,
			   cc->sector_size >> SECTOR_SHIFT);
		goto bad;
	}
	cc->iv_offset = val;

	r = dm_get_device(ti, argv[3], dm_table_get_mode(ti->table), &cc->dev);
	if (r) {
		DMERR("device %s: lookup failed (%d)", argv[3], r);
		ti->error = "Backing device not found or not openable";
		goto bad;
	}
	r = -EINVAL;
	if (lbs_parse_u64(argv[4], &val) || val != (sector_t)val) {
		lbs_reject(ti, "Device offset is not an unsigned decimal sector number",
			   "offset \"%s\" is not an unsigned decimal sector number",
			   argv[4]);
		goto bad;
	}
	cc->start = val;

	if (bdev_is_zoned(cc->dev->bdev)) {
		/*
		 * Writes must reach a zoned device in the order they came:
		 * encrypted where they are submitted (no_write_workqueue, which
		 * status then shows, as dm-crypt's), each request waited for.
		 * Zone append is emulated by dm core with regular writes: an
		 * append's sector is the zone's start, not where the data lands,
		 * and the IV is made from the sector.
		 */
		set_bit(LBS_OPT_NO_WRITE_WORKQUEUE, &cc->opts);
		cc->write_inline = true;
		ti->emulate_zone_append = true;
	}

	r = lbs_integrity_ctr(ti, cc);
	if (r)
		goto bad;
	lbs_atomic_ctr(cc);
	r = lbs_io_init(ti, cc);
	if (r)
		goto bad;

	ti->num_flush_bios = 1;
	if (test_bit(LBS_OPT_ALLOW_DISCARDS, &cc->opts))
		ti->num_discard_bios = 1;
	ti->per_io_data_size = cc->per_io_size;
	ti->limit_swap_bios = true;
	/* clones go down through dm_submit_bio_remap(): accounted from there */
	ti->accounts_remapped_io = true;
	return 0;
bad:
	lbs_dtr(ti);
	return r;
}

static void lbs_status_table(struct lbs_config *cc, struct dm_target *ti,
			     char *result, unsigned int maxlen)
{
	unsigned int sz = 0, i, n = 0;

	DMEMIT("%s ", cc->cipher_string);
	if (!cc->key_size)
		DMEMIT("-");
	else if (cc->key_string)
		DMEMIT(":%u:%s", cc->key_size, cc->key_string);
	else
		for (i = 0; i < cc->key_size; i++)
			DMEMIT("%02x", cc->key[i]);
	DMEMIT(" %llu %s %llu", (unsigned long long)cc->iv_offset,
	       cc->dev->name, (unsigned long long)cc->start);

	for (i = 0; i < LBS_NR_OPTS; i++)
		n += test_bit(i, &cc->opts);
	if (!n)
		return;
	DMEMIT(" %u", n);
	for (i = 0; i < LBS_NR_OPTS; i++) {
		if (!test_bit(i, &cc->opts))
			continue;
		if (i == LBS_OPT_SECTOR_SIZE)
			DMEMIT(" %s:%u", lbs_opt_names[i], cc->sector_size);
		else if (i == LBS_OPT_INTEGRITY)
			DMEMIT(" %s:%u:%s", lbs_opt_names[i], cc->tag_size,
			       cc->integrity_type);
		else if (i == LBS_OPT_INTEGRITY_KEY_SIZE)
			DMEMIT(" %s:%u", lbs_opt_names[i], cc->key_mac_size);
		else
			DMEMIT(" %s", lbs_opt_names[i]);
	}
}

static void lbs_status_ima(struct lbs_config *cc, struct dm_target *ti,
			   char *result, unsigned int maxlen)
{
	unsigned int sz = 0, i;

	DMEMIT_TARGET_NAME_VERSION(ti->type);
	for (i = 0; i < LBS_NR_OPTS; i++)
		if (!lbs_opt_valued(i))
			DMEMIT(",%s=%c", lbs_opt_names[i],
			       test_bit(i, &cc->opts) ? 'y' : 'n');
	if (test_bit(LBS_OPT_INTEGRITY, &cc->opts))
		DMEMIT(",integrity_tag_size=%u,cipher_auth=%s", cc->tag_size,
		       cc->integrity_type);
	if (test_bit(LBS_OPT_SECTOR_SIZE, &cc->opts))
		DMEMIT(",%s=%u", lbs_opt_names[LBS_OPT_SECTOR_SIZE],
		       cc->sector_size);
	DMEMIT(",cipher_string=%s", cc->cipher_string);
	DMEMIT(",key_size=%u,key_parts=%u,key_extra_size=%u,key_mac_size=%u;",
	       cc->key_size, cc->key_parts, cc->key_extra_size,
	       cc->key_mac_size);
}

static void lbs_status(struct dm_target *ti, status_type_t type,
		       unsigned int status_flags, char *result,
		       unsigned int maxlen)
{
	struct lbs_config *cc = ti->private;

	switch (type) {
	case STATUSTYPE_INFO:
		result[0] = '\0';
		break;
	case STATUSTYPE_TABLE:
		/* "key set" and "key wipe" free the key string under it */
		mutex_lock(&cc->key_lock);
		lbs_status_table(cc, ti, result, maxlen);
		mutex_unlock(&cc->key_lock);
		break;
	case STATUSTYPE_IMA:
		lbs_status_ima(cc, ti, result, maxlen);
		break;
	}
}

/*
 * Key messages are taken only while the device is suspended.  key_lock
 * makes each message's test of LBS_SUSPENDED and its change of the key one
 * step against resume, and against other messages.  A key wiped between
 * preresume and resume is caught by lbs_map(), which fails I/O while the
 * key is not valid: nothing is ever read or written with a wiped key.
 */
static void lbs_postsuspend(struct dm_target *ti)
{
	struct lbs_config *cc = ti->private;

	mutex_lock(&cc->key_lock);
	set_bit(LBS_SUSPENDED, &cc->state);
	mutex_unlock(&cc->key_lock);
}

static int lbs_preresume(struct dm_target *ti)
{
	struct lbs_config *cc = ti->private;
	int r = 0;

	mutex_lock(&cc->key_lock);
	if (!test_bit(LBS_KEY_VALID, &cc->state)) {
		DMERR("resume refused: the key was wiped; load one with \"key set\" first");
		r = -EAGAIN;
	}
	mutex_unlock(&cc->key_lock);
	return r;
}

static void lbs_resume(struct dm_target *ti)
{
	struct lbs_config *cc = ti->private;

	mutex_lock(&cc->key_lock);
	clear_bit(LBS_SUSPENDED, &cc->state);
	mutex_unlock(&cc->key_lock);
}

/*
 * "key set <key>"; the key argument is overwritten whatever happens.  The
 * key is read (a keyring key may call up to user space, which may touch
 * this device) before key_lock is taken; under it, the device must still be
 * suspended, and the transforms take the key all or nothing.
 */
static int lbs_message_key_set(struct lbs_config *cc, char *key)
{
	struct lbs_key new = { };
	int key_size, r = -EINVAL;

	if (!test_bit(LBS_SUSPENDED, &cc->state)) {
		DMERR("key set refused: suspend the device first");
		goto out;
	}
	key_size = lbs_key_size(key);
	if (key_size < 0) {
		DMERR("key set refused: not hex, \"-\" or a keyring reference of at most %u bytes",
		      LBS_MAX_KEY_SIZE);
		goto out;
	}
	if (key_size != cc->key_size) {
		DMERR("key set refused: key of %d bytes, the table's key has %u",
		      key_size, cc->key_size);
		goto out;
	}
	/* the device is suspended: no allocation may wait for its I/O */
	new.bytes = kmalloc(max(cc->key_size, 1U), GFP_NOIO);
	if (!new.bytes) {
		r = -ENOMEM;
		goto out;
	}
	r = lbs_read_key(cc, key, &new);
	if (r) {
		DMERR("key set refused: bad hex, or keyring key not found or of another size (%d)",
		      r);
		goto out;
	}

	mutex_lock(&cc->key_lock);
	if (test_bit(LBS_SUSPENDED, &cc->state)) {
		r = lbs_apply_key(cc, &new);
		if (r)
			DMERR("key set failed (%d): refused by the cipher, previous key kept",
			      r);
	} else {
		DMERR("key set refused: the device was resumed meanwhile");
		r = -EINVAL;
	}
	mutex_unlock(&cc->key_lock);
out:
	kfree_sensitive(new.bytes);
	kfree_sensitive(new.string);
	memset(key, '0', strlen(key));
	return r;
}

/* Messages: "key set <key>" and "key wipe", only while suspended. */
static int lbs_message(struct dm_target *ti, unsigned int argc, char **argv,
		       char *result, unsigned int maxlen)
{
	struct lbs_config *cc = ti->private;
	int r = -EINVAL;

	if (argc < 2 || strcasecmp(argv[0], "key")) {
		DMERR("unknown message; accepted: \"key set <key>\", \"key wipe\"");
		return -EINVAL;
	}
	if (argc == 3 && !strcasecmp(argv[1], "set"))
		return lbs_message_key_set(cc, argv[2]);
	if (argc == 2 && !strcasecmp(argv[1], "wipe")) {
		mutex_lock(&cc->key_lock);
		if (test_bit(LBS_SUSPENDED, &cc->state))
			r = lbs_wipe_key(cc);
		else
			DMERR("key wipe refused: suspend the device first");
		mutex_unlock(&cc->key_lock);
		return r;
	}
	DMERR("unknown key message; accepted: \"key set <key>\", \"key wipe\"");
	return r;
}

static int lbs_iterate_devices(struct dm_target *ti,
			       iterate_devices_callout_fn fn, void *data)
{
	struct lbs_config *cc = ti->private;

	return fn(ti, cc->dev, cc->start, ti->len, data);
}

#ifdef CONFIG_BLK_DEV_ZONED
static int lbs_report_zones(struct dm_target *ti,
			    struct dm_report_zones_args *args,
			    unsigned int nr_zones)
{
	struct lbs_config *cc = ti->private;

	return dm_report_zones(cc->dev->bdev, cc->start,
			       cc->start + dm_target_offset(ti, args->next_sector),
			       args, nr_zones);
}
#else
#define lbs_report_zones NULL
#endif

static void lbs_io_hints(struct dm_target *ti, struct queue_limits *limits)
{
	struct lbs_config *cc = ti->private;
	/* the most a bio the target may not split can hold, in sectors */
	unsigned int whole = LBS_BOUNCE_PAGES << PAGE_SECTORS_SHIFT;

	limits->logical_block_size = max(limits->logical_block_size,
					 cc->sector_size);
	limits->physical_block_size = max(limits->physical_block_size,
					  cc->sector_size);
	limits->io_min = max(limits->io_min, cc->sector_size);
	/* every bio_vec holds whole encryption sectors */
	limits->dma_alignment = max(limits->dma_alignment,
				    limits->logical_block_size - 1);
	/* one bounce bio; with integrity, one metadata pool entry too */
	if (cc->tuple_size)
		whole = min(whole, cc->tag_pool_sectors);
	/*
	 * zoned writes: dm core cuts them to this (with zone write plugging),
	 * or the target does (compat.h); at least a page, which the block
	 * layer requires (lbs_integrity_ctr() sizes the pool for it)
	 */
	if (cc->write_inline)
		limits->max_hw_sectors = min(limits->max_hw_sectors, whole);
	/* nor are atomic writes */
	lbs_atomic_limits(limits,
			  rounddown_pow_of_two(whole) << SECTOR_SHIFT);
}

static struct target_type lbs_target = {
	.name = "crypt",
	.version = { LBS_VERSION_MAJOR, LBS_VERSION_MINOR, LBS_VERSION_PATCH },
	.module = THIS_MODULE,
	.features = DM_TARGET_ZONED_HM | LBS_TARGET_ATOMIC_WRITES,
	.report_zones = lbs_report_zones,
	.ctr = lbs_ctr,
	.dtr = lbs_dtr,
	.map = lbs_map,
	.status = lbs_status,
	.postsuspend = lbs_postsuspend,
	.preresume = lbs_preresume,
	.resume = lbs_resume,
	.message = lbs_message,
	.iterate_devices = lbs_iterate_devices,
	.io_hints = lbs_io_hints,
};

static int __init lbs_init(void)
{
	int r;

	if (!target_name || !*target_name) {
		pr_err("dm-crypt-lbs: target_name must not be empty\n");
		return -EINVAL;
	}
	lbs_target.name = target_name;
	r = dm_register_target(&lbs_target);
	if (r)
		pr_err("dm-crypt-lbs: cannot register target \"%s\" (%d)%s\n",
		       target_name, r,
		       r == -EEXIST || r == -EBUSY ?
		       ": another module has it; unload dm_crypt or use target_name=" : "");
	return r;
}

static void __exit lbs_exit(void)
{
	dm_unregister_target(&lbs_target);
}

module_init(lbs_init);
module_exit(lbs_exit);

MODULE_DESCRIPTION(DM_NAME " crypt target with encryption sectors up to the page size");
MODULE_LICENSE("GPL");
MODULE_VERSION(LBS_VERSION_STRING);
