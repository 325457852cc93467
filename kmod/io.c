// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: the bio path.
 *
 * Reads: the bio is cloned onto the backing device; when the clone
 * completes, the data is decrypted in place in the crypt workqueue and the
 * bio completes.  Writes: the crypt workqueue encrypts into bounce pages of
 * a clone bio, which is then submitted; its completion completes the bio.
 *
 * Every encryption sector is one crypto request with one scatterlist entry
 * per direction, inside one page (sector_size <= PAGE_SIZE and the queue's
 * dma_alignment make that so).  Crypto runs only in workqueue context, so
 * IV generators and allocations may sleep; the asynchronous completion
 * callback never sleeps.  Memory comes from mempools and a bioset, so a
 * bio never fails for lack of memory.
 *
 * Forward progress under memory pressure.  Each context waits for memory
 * that only other, independent contexts give back:
 *  - io_wq only submits reads whose clone could not be allocated without
 *    waiting; it waits in bio_alloc_clone() for a bio of the bioset, which
 *    every clone returns when it completes on the backing device.
 *  - crypt_wq converts bios.  A write waits for bounce pages (below), a
 *    request waits for a req_pool element; both are returned by requests
 *    and writes already submitted, which complete without this queue.
 *  - The writer thread submits writes whose encryption completed
 *    asynchronously, and nothing else: it never allocates, so it never
 *    waits behind a read that waits for memory the writes hold.
 * A write encrypted synchronously is submitted by the crypt worker that
 * encrypted it.  All three queues have rescuers (WQ_MEM_RECLAIM) or are a
 * thread of their own, so none waits for a worker to be created.
 *
 * Bounce pages are bounded across all devices (lbs_bounce_limit, 2% of RAM
 * unless set): past the bound the page pool hands out only its reserve of
 * one bio's pages, drained by one writer at a time.
 */

#include <linux/blkdev.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/rbtree.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "dm-crypt-lbs.h"

#define LBS_BOUNCE_SECTORS	(LBS_BOUNCE_PAGES << (PAGE_SHIFT - SECTOR_SHIFT))

static void lbs_end_base(struct lbs_io *io)
{
	if (io->error)
		io->base->bi_status = io->error;
	bio_endio(io->base);
}

static void lbs_fail(struct lbs_io *io, blk_status_t status)
{
	WRITE_ONCE(io->error, status);
}

/*
 * Bounce pages, counted across all devices.  Pages are counted from the
 * moment a pool takes them from the page allocator until it gives them
 * back, its reserve included, so at any time
 *   lbs_bounce_pages <= lbs_bounce_limit + devices * LBS_BOUNCE_PAGES.
 */
static atomic_long_t lbs_bounce_pages = ATOMIC_LONG_INIT(0);
static atomic_long_t lbs_bounce_peak = ATOMIC_LONG_INIT(0);
static unsigned long lbs_bounce_limit;

/* The default bound: 2% of RAM, at least four bios' worth. */
static unsigned long lbs_bounce_default(void)
{
	return max_t(unsigned long, totalram_pages() / 50,
		     4 * LBS_BOUNCE_PAGES);
}

static int lbs_bounce_limit_set(const char *val, const struct kernel_param *kp)
{
	unsigned long pages;
	int r;

	r = kstrtoul(val, 10, &pages);
	if (r)
		return r;
	WRITE_ONCE(lbs_bounce_limit, pages ? pages : lbs_bounce_default());
	return 0;
}

static int lbs_bounce_limit_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%lu\n", READ_ONCE(lbs_bounce_limit));
}

static const struct kernel_param_ops lbs_bounce_limit_ops = {
	.set = lbs_bounce_limit_set,
	.get = lbs_bounce_limit_get,
};
module_param_cb(max_bounce_pages, &lbs_bounce_limit_ops, NULL, 0644);
MODULE_PARM_DESC(max_bounce_pages,
		 "bound on the bounce pages of all devices together (0: 2% of RAM); past it each device writes from its own reserve of one bio");

static int lbs_bounce_count_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%ld\n",
			 atomic_long_read((atomic_long_t *)kp->arg));
}

/* Writing anything starts a new peak from the pages held now. */
static int lbs_bounce_peak_set(const char *val, const struct kernel_param *kp)
{
	atomic_long_set(&lbs_bounce_peak, atomic_long_read(&lbs_bounce_pages));
	return 0;
}

static const struct kernel_param_ops lbs_bounce_count_ops = {
	.get = lbs_bounce_count_get,
};

static const struct kernel_param_ops lbs_bounce_peak_ops = {
	.set = lbs_bounce_peak_set,
	.get = lbs_bounce_count_get,
};
module_param_cb(bounce_pages, &lbs_bounce_count_ops, &lbs_bounce_pages, 0444);
MODULE_PARM_DESC(bounce_pages, "bounce pages all devices hold now");
module_param_cb(bounce_pages_peak, &lbs_bounce_peak_ops, &lbs_bounce_peak,
		0644);
MODULE_PARM_DESC(bounce_pages_peak,
		 "most bounce pages held at once (write to restart from now)");

/*
 * The page pool's allocator.  Once the pool is filled (bounce_limited),
 * a page past the bound is refused, and mempool_alloc() falls back to the
 * pool's reserve or waits for a page to come back.
 */
static void *lbs_page_alloc(gfp_t gfp, void *data)
{
	struct lbs_config *cc = data;
	long held = atomic_long_inc_return(&lbs_bounce_pages);
	long peak = atomic_long_read(&lbs_bounce_peak);
	struct page *page;

	if (READ_ONCE(cc->bounce_limited) &&
	    held > (long)READ_ONCE(lbs_bounce_limit))
		goto refuse;
	page = alloc_page(gfp);
	if (!page)
		goto refuse;
	while (held > peak &&
	       !atomic_long_try_cmpxchg(&lbs_bounce_peak, &peak, held))
		;
	return page;
refuse:
	atomic_long_dec(&lbs_bounce_pages);
	return NULL;
}

static void lbs_page_free(void *element, void *data)
{
	__free_page(element);
	atomic_long_dec(&lbs_bounce_pages);
}

/* Bounce pages of a write clone */

static void lbs_free_bounce(struct lbs_config *cc, struct bio *clone)
{
	unsigned short i;

	/* __bio_add_page() added one page per vector, never merged */
	for (i = 0; i < clone->bi_vcnt; i++)
		mempool_free(clone->bi_io_vec[i].bv_page, &cc->page_pool);
	bio_put(clone);
}

static void lbs_write_endio(struct bio *clone);

static struct bio *lbs_try_bounce(struct lbs_io *io, gfp_t gfp)
{
	struct lbs_config *cc = io->cc;
	unsigned int size = io->base->bi_iter.bi_size;
	struct bio *clone;

	clone = bio_alloc_bioset(cc->dev->bdev, DIV_ROUND_UP(size, PAGE_SIZE),
				 io->base->bi_opf, GFP_NOIO, &cc->bs);
	clone->bi_private = io;
	clone->bi_end_io = lbs_write_endio;
	clone->bi_ioprio = io->base->bi_ioprio;
	clone->bi_iter.bi_sector = cc->start + io->sector;

	while (size) {
		unsigned int len = min_t(unsigned int, size, PAGE_SIZE);
		struct page *page = mempool_alloc(&cc->page_pool, gfp);

		if (!page) {
			lbs_free_bounce(cc, clone);
			return NULL;
		}
		__bio_add_page(clone, page, len, 0);
		size -= len;
	}
	return clone;
}

/*
 * Take the pages without waiting if memory allows.  Otherwise wait for the
 * reserve, one writer at a time: the pool holds enough pages for one
 * bio, and every other holder gives its pages back when its write ends.
 */
static struct bio *lbs_alloc_bounce(struct lbs_io *io)
{
	struct lbs_config *cc = io->cc;
	struct bio *clone;

	clone = lbs_try_bounce(io, GFP_NOWAIT | __GFP_NOWARN);
	if (clone)
		return clone;
	mutex_lock(&cc->bounce_lock);
	clone = lbs_try_bounce(io, GFP_NOIO);
	mutex_unlock(&cc->bounce_lock);
	return clone;
}

/* Completion of the conversion */

static void lbs_write_abort(struct lbs_io *io)
{
	lbs_free_bounce(io->cc, io->clone);
	io->clone = NULL;
	lbs_end_base(io);
}

/*
 * Writes encrypted asynchronously wait in write_tree, by sector, for the
 * writer thread.  Called from the crypto driver's completion context.
 */
static void lbs_queue_write(struct lbs_io *io)
{
	struct lbs_config *cc = io->cc;
	sector_t sector = io->clone->bi_iter.bi_sector;
	struct rb_node **link, *parent = NULL;
	unsigned long flags;

	spin_lock_irqsave(&cc->write_lock, flags);
	link = &cc->write_tree.rb_node;
	while (*link) {
		parent = *link;
		if (sector < rb_entry(parent, struct lbs_io,
				      rb_node)->clone->bi_iter.bi_sector)
			link = &parent->rb_left;
		else
			link = &parent->rb_right;
	}
	rb_link_node(&io->rb_node, parent, link);
	rb_insert_color(&io->rb_node, &cc->write_tree);
	spin_unlock_irqrestore(&cc->write_lock, flags);
	wake_up_process(cc->write_thread);
}

/*
 * The writer thread: takes every queued write at once and submits them in
 * sector order under a plug, so the backing device sees them merged and in
 * order however the crypto driver reordered them.
 */
static int lbs_write_thread(void *data)
{
	struct lbs_config *cc = data;
	struct blk_plug plug;
	struct rb_root tree;
	struct rb_node *node;

	for (;;) {
		set_current_state(TASK_IDLE);
		spin_lock_irq(&cc->write_lock);
		tree = cc->write_tree;
		cc->write_tree = RB_ROOT;
		spin_unlock_irq(&cc->write_lock);

		if (RB_EMPTY_ROOT(&tree)) {
			if (kthread_should_stop())
				break;
			schedule();
			continue;
		}
		__set_current_state(TASK_RUNNING);
		blk_start_plug(&plug);
		/* a write may complete, freeing its io, as soon as it is submitted */
		while ((node = rb_first(&tree))) {
			rb_erase(node, &tree);
			submit_bio_noacct(rb_entry(node, struct lbs_io,
						   rb_node)->clone);
		}
		blk_finish_plug(&plug);
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

/* Drop one reference; the last one finishes the bio. */
static void lbs_convert_put(struct lbs_io *io, bool in_worker)
{
	if (!atomic_dec_and_test(&io->pending))
		return;

	if (bio_data_dir(io->base) == READ) {
		lbs_end_base(io);
	} else if (io->error) {
		lbs_write_abort(io);
	} else if (in_worker) {
		submit_bio_noacct(io->clone);
	} else {
		/* from the crypto driver's context: the writer thread submits */
		lbs_queue_write(io);
	}
}

static void lbs_crypt_done(LBS_ASYNC_ARG areq, int err)
{
	struct lbs_req *lr = lbs_async_data(areq);
	struct lbs_io *io = lr->io;
	struct lbs_config *cc = io->cc;

	if (err == -EINPROGRESS) {
		/* a backlogged request was accepted: the converter may go on */
		complete(&io->restart);
		return;
	}
	if (err) {
		DMERR_LIMIT("crypto error %d on sector %llu", err,
			    (unsigned long long)lr->iv_sector);
		lbs_fail(io, BLK_STS_IOERR);
	}
	mempool_free((u8 *)lr - cc->req_lr_off, &cc->req_pool);
	lbs_convert_put(io, false);
}

/*
 * Encrypt (write) or decrypt (read) io->bio_in into io->bio_out, one
 * encryption sector per request.  Runs in a workqueue.
 */
static void lbs_convert(struct lbs_io *io)
{
	struct lbs_config *cc = io->cc;
	bool write = bio_data_dir(io->base) == WRITE;
	unsigned int ss = cc->sector_size;
	struct skcipher_request *req = NULL;
	int r;

	atomic_set(&io->pending, 1);
	while (io->iter_in.bi_size) {
		struct bio_vec in = bio_iter_iovec(io->bio_in, io->iter_in);
		struct bio_vec out = bio_iter_iovec(io->bio_out, io->iter_out);
		u64 sector = io->sector + cc->iv_offset;
		struct lbs_req *lr;
		u8 *iv = NULL;

		/* a sector must lie within one page of both buffers */
		if (unlikely(in.bv_len < ss || out.bv_len < ss)) {
			DMERR_LIMIT("buffer not aligned to sector_size %u", ss);
			lbs_fail(io, BLK_STS_IOERR);
			break;
		}
		if (!req)
			req = mempool_alloc(&cc->req_pool, GFP_NOIO);
		lr = lbs_req_of(cc, req);
		lr->io = io;
		lr->iv_sector = sector;
		if (test_bit(LBS_OPT_IV_LARGE_SECTORS, &cc->opts))
			lr->iv_sector >>= cc->sector_shift;

		sg_init_table(&lr->sg_in, 1);
		sg_set_page(&lr->sg_in, in.bv_page, ss, in.bv_offset);
		sg_init_table(&lr->sg_out, 1);
		sg_set_page(&lr->sg_out, out.bv_page, ss, out.bv_offset);

		if (cc->iv_ops) {
			iv = lbs_req_iv(cc, lr);
			r = cc->iv_ops->gen(cc, iv, lr);
			if (r) {
				DMERR_LIMIT("IV generation failed (%d)", r);
				lbs_fail(io, BLK_STS_IOERR);
				break;
			}
		}
		skcipher_request_set_tfm(req, cc->tfms[sector & (cc->tfms_count - 1)]);
		skcipher_request_set_callback(req, CRYPTO_TFM_REQ_MAY_BACKLOG |
					      CRYPTO_TFM_REQ_MAY_SLEEP,
					      lbs_crypt_done, lr);
		skcipher_request_set_crypt(req, &lr->sg_in, &lr->sg_out, ss, iv);

		atomic_inc(&io->pending);
		r = write ? crypto_skcipher_encrypt(req) :
			    crypto_skcipher_decrypt(req);

		bio_advance_iter(io->bio_in, &io->iter_in, ss);
		bio_advance_iter(io->bio_out, &io->iter_out, ss);
		io->sector += ss >> SECTOR_SHIFT;

		if (r == -EBUSY) {
			/* backlogged: wait until the driver takes it */
			wait_for_completion(&io->restart);
			reinit_completion(&io->restart);
			req = NULL;
		} else if (r == -EINPROGRESS) {
			req = NULL;	/* lbs_crypt_done() owns it now */
		} else {
			atomic_dec(&io->pending);
			if (r) {
				DMERR_LIMIT("crypto error %d on sector %llu", r,
					    (unsigned long long)lr->iv_sector);
				lbs_fail(io, BLK_STS_IOERR);
				break;
			}
		}
		cond_resched();
	}
	if (req)
		mempool_free(req, &cc->req_pool);
	lbs_convert_put(io, true);
}

static void lbs_read_crypt_work(struct work_struct *work)
{
	struct lbs_io *io = container_of(work, struct lbs_io, work);

	/* decrypt in place in the original bio's pages */
	io->bio_in = io->base;
	io->bio_out = io->base;
	io->iter_in = io->base->bi_iter;
	io->iter_out = io->base->bi_iter;
	lbs_convert(io);
}

static void lbs_write_crypt_work(struct work_struct *work)
{
	struct lbs_io *io = container_of(work, struct lbs_io, work);

	io->clone = lbs_alloc_bounce(io);
	io->bio_in = io->base;
	io->iter_in = io->base->bi_iter;
	io->bio_out = io->clone;
	io->iter_out = io->clone->bi_iter;
	lbs_convert(io);
}

/* Completions of the clones, in any context */

static void lbs_write_endio(struct bio *clone)
{
	struct lbs_io *io = clone->bi_private;

	if (clone->bi_status)
		lbs_fail(io, clone->bi_status);
	lbs_free_bounce(io->cc, clone);
	io->clone = NULL;
	lbs_end_base(io);
}

static void lbs_read_endio(struct bio *clone)
{
	struct lbs_io *io = clone->bi_private;
	blk_status_t status = clone->bi_status;

	bio_put(clone);
	if (status) {
		/* nothing was decrypted: fail without touching the data */
		lbs_fail(io, status);
		lbs_end_base(io);
		return;
	}
	INIT_WORK(&io->work, lbs_read_crypt_work);
	queue_work(io->cc->crypt_wq, &io->work);
}

static bool lbs_read_submit(struct lbs_io *io, gfp_t gfp)
{
	struct lbs_config *cc = io->cc;
	struct bio *clone;

	clone = bio_alloc_clone(cc->dev->bdev, io->base, gfp, &cc->bs);
	if (!clone)
		return false;
	clone->bi_private = io;
	clone->bi_end_io = lbs_read_endio;
	clone->bi_iter.bi_sector = cc->start + io->sector;
	submit_bio_noacct(clone);
	return true;
}

static void lbs_read_submit_work(struct work_struct *work)
{
	struct lbs_io *io = container_of(work, struct lbs_io, work);

	lbs_read_submit(io, GFP_NOIO);
}

int lbs_map(struct dm_target *ti, struct bio *bio)
{
	struct lbs_config *cc = ti->private;
	struct lbs_io *io;
	sector_t offset;

	/*
	 * Flushes and discards carry no data to convert: pass them on.  dm core
	 * sends no discard unless allow_discards set num_discard_bios.
	 */
	if (unlikely(bio->bi_opf & REQ_PREFLUSH ||
		     bio_op(bio) == REQ_OP_DISCARD)) {
		bio_set_dev(bio, cc->dev->bdev);
		if (bio_sectors(bio))
			bio->bi_iter.bi_sector = cc->start +
				dm_target_offset(ti, bio->bi_iter.bi_sector);
		return DM_MAPIO_REMAPPED;
	}

	/* a write larger than the bounce reserve is split; dm resubmits the rest */
	if (bio_data_dir(bio) == WRITE && bio_sectors(bio) > LBS_BOUNCE_SECTORS)
		dm_accept_partial_bio(bio, LBS_BOUNCE_SECTORS);

	/* a key wiped between preresume and resume: never use the random key */
	if (unlikely(!test_bit(LBS_KEY_VALID, &cc->state))) {
		DMERR_LIMIT("I/O refused: the key was wiped; \"key set\" it while suspended");
		return DM_MAPIO_KILL;
	}

	offset = dm_target_offset(ti, bio->bi_iter.bi_sector);
	if (unlikely((offset & ((cc->sector_size >> SECTOR_SHIFT) - 1)) ||
		     (bio->bi_iter.bi_size & (cc->sector_size - 1))))
		return DM_MAPIO_KILL;

	io = dm_per_bio_data(bio, sizeof(struct lbs_io));
	io->cc = cc;
	io->base = bio;
	io->clone = NULL;
	io->sector = offset;
	io->error = BLK_STS_OK;
	init_completion(&io->restart);

	if (bio_data_dir(bio) == READ) {
		if (!lbs_read_submit(io, GFP_NOWAIT | __GFP_NOWARN)) {
			INIT_WORK(&io->work, lbs_read_submit_work);
			queue_work(cc->io_wq, &io->work);
		}
	} else {
		INIT_WORK(&io->work, lbs_write_crypt_work);
		queue_work(cc->crypt_wq, &io->work);
	}
	return DM_MAPIO_SUBMITTED;
}

/*
 * Layout of one req_pool element:
 *   skcipher_request + driver context | lbs_req | IV (aligned) | scratch
 */
static void lbs_req_layout(struct lbs_config *cc)
{
	struct crypto_skcipher *tfm = cc->tfms[0];
	unsigned int off;

	off = sizeof(struct skcipher_request) + crypto_skcipher_reqsize(tfm);
	off = ALIGN(off, __alignof__(struct lbs_req));
	cc->req_lr_off = off;
	off += sizeof(struct lbs_req);
	cc->req_iv_off = off;
	off += crypto_skcipher_alignmask(tfm) + cc->iv_size;
	off = ALIGN(off, CRYPTO_MINALIGN);
	cc->req_scratch_off = off;
	off += lbs_iv_scratch_size(cc);
	cc->req_size = off;
}

int lbs_io_init(struct dm_target *ti, struct lbs_config *cc)
{
	const char *dev = dm_table_device_name(ti->table);
	unsigned int flags = WQ_MEM_RECLAIM;
	int r;

	lbs_req_layout(cc);
	r = mempool_init_kmalloc_pool(&cc->req_pool, LBS_MIN_IOS, cc->req_size);
	if (r)
		goto nomem;
	if (!READ_ONCE(lbs_bounce_limit))
		WRITE_ONCE(lbs_bounce_limit, lbs_bounce_default());
	r = mempool_init(&cc->page_pool, LBS_BOUNCE_PAGES, lbs_page_alloc,
			 lbs_page_free, cc);
	if (r)
		goto nomem;
	WRITE_ONCE(cc->bounce_limited, true);
	r = bioset_init(&cc->bs, LBS_MIN_IOS, 0, BIOSET_NEED_BVECS);
	if (r)
		goto nomem;
	mutex_init(&cc->bounce_lock);

	if (test_bit(LBS_OPT_HIGH_PRIORITY, &cc->opts))
		flags |= WQ_HIGHPRI;
	cc->io_wq = alloc_workqueue("kcryptd_lbs_io/%s", flags, 1, dev);
	if (test_bit(LBS_OPT_SAME_CPU_CRYPT, &cc->opts))
		cc->crypt_wq = alloc_workqueue("kcryptd_lbs/%s",
					       flags | WQ_CPU_INTENSIVE, 1, dev);
	else
		cc->crypt_wq = alloc_workqueue("kcryptd_lbs/%s",
					       flags | WQ_UNBOUND,
					       num_online_cpus(), dev);
	if (!cc->io_wq || !cc->crypt_wq) {
		r = -ENOMEM;
		goto nomem;
	}

	spin_lock_init(&cc->write_lock);
	cc->write_tree = RB_ROOT;
	cc->write_thread = kthread_run(lbs_write_thread, cc, "kcryptd_lbs_w/%s",
				       dev);
	if (IS_ERR(cc->write_thread)) {
		r = PTR_ERR(cc->write_thread);
		cc->write_thread = NULL;
		goto nomem;
	}
	return 0;
nomem:
	ti->error = "Cannot allocate the I/O pools, workqueues and writer thread";
	return r;
}

/* Safe on a half-initialised (zeroed) config. */
void lbs_io_exit(struct lbs_config *cc)
{
	/* no I/O is in flight: the write tree is empty */
	if (cc->write_thread)
		kthread_stop(cc->write_thread);
	if (cc->crypt_wq)
		destroy_workqueue(cc->crypt_wq);
	if (cc->io_wq)
		destroy_workqueue(cc->io_wq);
	bioset_exit(&cc->bs);
	mempool_exit(&cc->page_pool);
	mempool_exit(&cc->req_pool);
}
