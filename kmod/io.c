// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: the bio path.
 *
 * Reads: the bio is cloned onto the backing device; when the clone
 * completes, the data is decrypted in place and the bio completes.  Writes:
 * the data is encrypted into bounce pages of a clone bio (bounce.c), which
 * is then submitted; its completion completes the bio.
 *
 * Every encryption sector is one crypto request (an skcipher request, or an
 * AEAD request with the sector's integrity metadata, integrity.c) with one
 * scatterlist entry of data per direction, inside one page (sector_size <=
 * PAGE_SIZE and the queue's dma_alignment make that so).  The first request
 * of a bio lives in its per-bio data; a synchronous cipher reuses it for
 * every sector, so a bio allocates no request.  Further requests, needed
 * only while the driver holds earlier ones, come from req_pool.
 *
 * Where the conversion runs (dm-crypt's options, with its semantics):
 *  - by default in crypt_wq, a workqueue; it may sleep;
 *  - no_read_workqueue: a read is decrypted in the clone's completion, which
 *    may not sleep: requests without CRYPTO_TFM_REQ_MAY_SLEEP, allocations
 *    that do not wait, and whatever would wait (an empty pool, a full
 *    driver queue, a sleeping IV generator) goes on in crypt_wq from the
 *    sector it reached.  A completion in hard interrupt context or with
 *    interrupts off goes to crypt_wq at once (the skcipher walk refuses it);
 *  - no_write_workqueue: a write is encrypted in lbs_map(), in the
 *    submitter's task context, and submitted from there.
 * Where an encrypted write is submitted from: by default the writer thread
 * (writer.c), in sector order; with submit_from_crypt_cpus or
 * no_write_workqueue the context that encrypted it, when that was
 * synchronous.  A write whose encryption completed asynchronously always
 * goes to the writer thread: the driver's completion may not sleep.
 *
 * Forward progress under memory pressure.  Each context waits only for
 * memory that other, independent contexts give back:
 *  - io_wq only submits reads whose clone could not be allocated without
 *    waiting; it waits in bio_alloc_clone() for a bio of the bioset, which
 *    every clone returns when it completes on the backing device.  With
 *    integrity metadata, lbs_map() waits for the bio's metadata buffer
 *    (integrity.c), or io_wq where lbs_map() may not sleep.
 *  - crypt_wq converts bios.  A write waits for bounce pages, a request for
 *    a req_pool element; both are returned by requests and writes already
 *    submitted, which complete without this queue.
 *  - The writer thread never allocates, so it never waits behind a read
 *    that waits for memory the writes hold.
 * Both queues have rescuers (WQ_MEM_RECLAIM) and the writer is a thread of
 * its own, so none waits for a worker to be created.
 */

#include <linux/blkdev.h>
#include <linux/idr.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "dm-crypt-lbs.h"

#define LBS_BOUNCE_SECTORS	(LBS_BOUNCE_PAGES << (PAGE_SHIFT - SECTOR_SHIFT))

/*
 * dm-crypt's request caps, with its names, default and meaning: a read or
 * write larger than the cap is split; a value may lower the cap, never
 * raise it (0: the default).  A cap below one encryption sector (or the
 * backing device's block) is one of those, so every size still works.
 * They bound the work of one conversion: with no_read_workqueue a read is
 * decrypted where its clone completed, without a reschedule point.
 */
#define LBS_MAX_REQUEST_DEFAULT	(128U * 1024)

/* Numbers that keep the workqueues' sysfs names unique */
static DEFINE_IDA(lbs_wq_ida);

static unsigned int lbs_max_read_size;
module_param_named(max_read_size, lbs_max_read_size, uint, 0644);
MODULE_PARM_DESC(max_read_size, "largest read handled whole, in bytes (0: 131072, the most)");
static unsigned int lbs_max_write_size;
module_param_named(max_write_size, lbs_max_write_size, uint, 0644);
MODULE_PARM_DESC(max_write_size, "largest write handled whole, in bytes (0: 131072, the most)");

static unsigned int lbs_max_request_sectors(struct lbs_config *cc,
					    struct bio *bio)
{
	unsigned int cap = bio_data_dir(bio) == WRITE ?
			   READ_ONCE(lbs_max_write_size) :
			   READ_ONCE(lbs_max_read_size);

	/* never cut: atomic writes, and zoned ones where dm core cuts them */
	if (lbs_bio_whole(cc, bio))
		return bio_sectors(bio);
	unsigned int unit = max(bdev_logical_block_size(cc->dev->bdev),
				cc->sector_size);

	cap = round_down(min_not_zero(cap, LBS_MAX_REQUEST_DEFAULT), unit);
	return max(cap, unit) >> SECTOR_SHIFT;
}

/* Where a conversion, or the last reference to it, is dropped. */
enum lbs_ctx {
	LBS_CTX_TASK,		/* a workqueue or lbs_map(): may sleep */
	LBS_CTX_ENDIO,		/* a clone's completion: may not sleep */
	LBS_CTX_CRYPTO,		/* the crypto driver's completion */
};

static void lbs_end_base(struct lbs_io *io)
{
	lbs_integrity_free(io);
	if (io->error)
		io->base->bi_status = io->error;
	bio_endio(io->base);
}

static void lbs_fail(struct lbs_io *io, blk_status_t status)
{
	WRITE_ONCE(io->error, status);
}

/* The request embedded in the per-bio data, after struct lbs_io. */
static void *lbs_own_req(struct lbs_io *io)
{
	return (u8 *)io + LBS_IO_REQ_OFFSET;
}

static void lbs_free_req(struct lbs_io *io, void *req)
{
	if (req != lbs_own_req(io))
		mempool_free(req, &io->cc->req_pool);
}

/* Drop the converter's or the completion's hold on a request the driver took. */
static void lbs_req_put(struct lbs_io *io, struct lbs_req *lr)
{
	if (refcount_dec_and_test(&lr->refs))
		lbs_free_req(io, (u8 *)lr - io->cc->req_lr_off);
}

static void lbs_write_endio(struct bio *clone)
{
	struct lbs_io *io = clone->bi_private;

	if (clone->bi_status)
		lbs_fail(io, clone->bi_status);
	lbs_free_bounce(io->cc, clone);
	io->clone = NULL;
	lbs_end_base(io);
}

static void lbs_write_submit(struct lbs_io *io, enum lbs_ctx ctx)
{
	struct lbs_config *cc = io->cc;

	if (ctx == LBS_CTX_TASK &&
	    (test_bit(LBS_OPT_NO_WRITE_WORKQUEUE, &cc->opts) ||
	     test_bit(LBS_OPT_SUBMIT_FROM_CRYPT_CPUS, &cc->opts)))
		dm_submit_bio_remap(io->base, io->clone);
	else
		lbs_queue_write(io);
}

static void lbs_recheck_work(struct work_struct *work);

/*
 * A read that ended: with a tag mismatch on its first pass it is read again
 * (lbs_recheck_work()); after that second pass, what it decrypted in its
 * private pages is copied to the bio when every tag matched.
 */
static void lbs_read_done(struct lbs_io *io)
{
	if (io->tag_failed && !io->rechecking) {
		io->rechecking = true;
		io->tag_failed = false;
		io->error = BLK_STS_OK;
		INIT_WORK(&io->work, lbs_recheck_work);
		queue_work(io->cc->io_wq, &io->work);
		return;
	}
	if (io->rechecking) {
		if (!io->error)
			bio_copy_data(io->base, io->clone);
		lbs_free_bounce(io->cc, io->clone);
		io->clone = NULL;
	}
	lbs_end_base(io);
}

/* Drop one reference; the last one finishes the conversion. */
static void lbs_convert_put(struct lbs_io *io, enum lbs_ctx ctx)
{
	if (!atomic_dec_and_test(&io->pending))
		return;

	if (bio_data_dir(io->base) == READ) {
		lbs_read_done(io);
	} else if (io->error) {
		lbs_free_bounce(io->cc, io->clone);
		io->clone = NULL;
		lbs_end_base(io);
	} else {
		lbs_write_submit(io, ctx);
	}
}

/*
 * A sector's request failed: a tag mismatch, or any other error.  A tag
 * mismatch is reported when the read again into private pages (where no
 * one can change the data under the cipher) confirms it, as dm-crypt does.
 */
static void lbs_crypt_error(struct lbs_io *io, struct lbs_req *lr, int err)
{
	if (err == -EBADMSG) {
		if (io->rechecking)
			DMERR_LIMIT("%pg: integrity tag mismatch at sector %llu: read fails",
				    io->cc->dev->bdev,
				    (unsigned long long)le64_to_cpu(*lbs_req_ad(io->cc, lr)));
		WRITE_ONCE(io->tag_failed, true);
		lbs_fail(io, BLK_STS_PROTECTION);
		return;
	}
	DMERR_LIMIT("crypto error %d on sector %llu", err,
		    (unsigned long long)lr->iv_sector);
	lbs_fail(io, BLK_STS_IOERR);
}

void lbs_crypt_done(LBS_ASYNC_ARG areq, int err)
{
	struct lbs_req *lr = lbs_async_data(areq);
	struct lbs_io *io = lr->io;
	struct lbs_config *cc = io->cc;
	int seen;

	if (err == -EINPROGRESS) {
		/* a backlogged request was accepted: the converter may go on */
		seen = atomic_fetch_or(LBS_REQ_NOTIFIED, &lr->state);
		if (seen & LBS_REQ_BUSY)
			complete(&io->restart);
		return;
	}
	if (!err && cc->iv_ops && cc->iv_ops->post)
		err = cc->iv_ops->post(cc, lbs_req_iv(cc, lr), lr);
	if (err)
		lbs_crypt_error(io, lr, err);
	/*
	 * Not every template passes the backlog's -EINPROGRESS on (6.1's
	 * authenc() drops it): a backlogged request that ends unannounced
	 * lets the converter waiting for it go on.  Only that one: the end of
	 * a request that was never backlogged releases nobody.
	 */
	seen = atomic_fetch_or(LBS_REQ_DONE, &lr->state);
	if ((seen & (LBS_REQ_BUSY | LBS_REQ_NOTIFIED)) == LBS_REQ_BUSY)
		complete(&io->restart);
	/* the converter may still read the state: the later of us frees it */
	lbs_req_put(io, lr);
	if (io->write_inline) {
		/* the converter waits for this and drops the reference */
		complete(&io->req_done);
		return;
	}
	lbs_convert_put(io, LBS_CTX_CRYPTO);
}

/*
 * The driver took the request (-EINPROGRESS, or -EBUSY: backlogged).  Hand
 * it over; true when the converter must wait for the driver to accept it
 * from the backlog before sending another.  The request is not touched
 * after the hold is dropped: its completion may have freed it.
 */
static bool lbs_sent(struct lbs_io *io, struct lbs_req *lr, bool busy)
{
	bool wait = false;

	if (busy) {
		int seen = atomic_fetch_or(LBS_REQ_BUSY, &lr->state);

		wait = !(seen & (LBS_REQ_NOTIFIED | LBS_REQ_DONE));
	}
	lbs_req_put(io, lr);
	return wait;
}

/* write_inline: wait for the request the driver took to end. */
static void lbs_wait_inline(struct lbs_io *io)
{
	wait_for_completion(&io->req_done);
	reinit_completion(&io->req_done);
	atomic_dec(&io->pending);
}

/*
 * A request for the next sector: the one in hand, our own, or the pool's
 * (without waiting where the caller may not sleep).
 */
static void *lbs_get_req(struct lbs_io *io, bool nosleep)
{
	if (!io->req && !io->own_req_used) {
		io->own_req_used = true;
		io->req = lbs_own_req(io);
	}
	if (!io->req)
		io->req = mempool_alloc(&io->cc->req_pool, nosleep ?
					GFP_NOWAIT | __GFP_NOWARN : GFP_NOIO);
	return io->req;
}

static void lbs_convert_work(struct work_struct *work);

/*
 * Encrypt (write) or decrypt (read) io->bio_in into io->bio_out, from the
 * sector the io stands at, one encryption sector per request.  ctx is
 * LBS_CTX_TASK or LBS_CTX_ENDIO; in the latter, whatever would wait is
 * left to crypt_wq, which goes on from there.
 */
static void lbs_convert(struct lbs_io *io, enum lbs_ctx ctx)
{
	struct lbs_config *cc = io->cc;
	bool write = bio_data_dir(io->base) == WRITE;
	bool nosleep = ctx != LBS_CTX_TASK;
	unsigned int ss = cc->sector_size;
	u32 flags = CRYPTO_TFM_REQ_MAY_BACKLOG |
		    (nosleep ? 0 : CRYPTO_TFM_REQ_MAY_SLEEP);
	int r;

	if (io->restart_wait) {
		/* a backlogged request must be taken before the next is sent */
		wait_for_completion(&io->restart);
		reinit_completion(&io->restart);
		io->restart_wait = false;
	}
	while (io->iter_in.bi_size) {
		struct bio_vec in = bio_iter_iovec(io->bio_in, io->iter_in);
		struct bio_vec out = bio_iter_iovec(io->bio_out, io->iter_out);
		u64 sector = io->sector + cc->iv_offset;
		struct lbs_req *lr;
		void *req;
		u8 *iv = NULL;

		/* a sector must lie within one page of both buffers */
		if (unlikely(in.bv_len < ss || out.bv_len < ss)) {
			DMERR_LIMIT("buffer not aligned to sector_size %u", ss);
			lbs_fail(io, BLK_STS_IOERR);
			break;
		}
		if (nosleep && cc->iv_ops && cc->iv_ops->needs_scratch)
			goto defer;	/* the IV generator sleeps */
		req = lbs_get_req(io, nosleep);
		if (!req)
			goto defer;
		lr = lbs_req_of(cc, req);
		lr->io = io;
		atomic_set(&lr->state, 0);
		/* held by the converter and the completion, if the driver takes it */
		refcount_set(&lr->refs, 2);
		lr->iv_sector = sector;
		if (test_bit(LBS_OPT_IV_LARGE_SECTORS, &cc->opts))
			lr->iv_sector >>= cc->sector_shift;

		sg_init_table(&lr->sg_in, 1);
		sg_set_page(&lr->sg_in, in.bv_page, ss, in.bv_offset);
		sg_init_table(&lr->sg_out, 1);
		sg_set_page(&lr->sg_out, out.bv_page, ss, out.bv_offset);
		lr->tag = NULL;
		if (cc->tuple_size)
			lbs_integrity_sector(io, lr, write);

		if (cc->aead) {
			atomic_inc(&io->pending);
			r = lbs_aead_crypt(io, req, lr, write, flags);
			goto sent;
		}
		if (cc->iv_ops) {
			iv = lbs_req_iv(cc, lr);
			r = lbs_make_iv(cc, lr, iv, write);
			if (r) {
				DMERR_LIMIT("IV generation failed (%d)", r);
				lbs_fail(io, BLK_STS_IOERR);
				break;
			}
		}
		skcipher_request_set_tfm(req, cc->tfms[sector & (cc->tfms_count - 1)]);
		skcipher_request_set_callback(req, flags, lbs_crypt_done, lr);
		skcipher_request_set_crypt(req, &lr->sg_in, &lr->sg_out, ss, iv);

		atomic_inc(&io->pending);
		r = write ? crypto_skcipher_encrypt(req) :
			    crypto_skcipher_decrypt(req);
sent:

		bio_advance_iter(io->bio_in, &io->iter_in, ss);
		bio_advance_iter(io->bio_out, &io->iter_out, ss);
		io->sector += ss >> SECTOR_SHIFT;

		if (r == -EBUSY) {
			/* backlogged: the driver owns it; wait until it takes it */
			io->req = NULL;
			if (!lbs_sent(io, lr, true)) {
				if (io->write_inline)
					lbs_wait_inline(io);
			} else if (!nosleep) {
				wait_for_completion(&io->restart);
				reinit_completion(&io->restart);
				if (io->write_inline)
					lbs_wait_inline(io);
			} else if (try_wait_for_completion(&io->restart)) {
				reinit_completion(&io->restart);
			} else {
				io->restart_wait = true;
				goto defer;
			}
		} else if (r == -EINPROGRESS) {
			io->req = NULL;	/* lbs_crypt_done() owns it now */
			lbs_sent(io, lr, false);
			if (io->write_inline)
				lbs_wait_inline(io);
		} else {
			atomic_dec(&io->pending);
			if (!r && cc->iv_ops && cc->iv_ops->post)
				r = cc->iv_ops->post(cc, iv, lr);
			if (r) {
				lbs_crypt_error(io, lr, r);
				break;
			}
		}
		if (!nosleep)
			cond_resched();
	}
	if (io->req) {
		lbs_free_req(io, io->req);
		io->req = NULL;
	}
	lbs_convert_put(io, ctx);
	return;
defer:
	INIT_WORK(&io->work, lbs_convert_work);
	queue_work(cc->crypt_wq, &io->work);
}

/* crypt_wq: go on with a conversion an atomic context left. */
static void lbs_convert_work(struct work_struct *work)
{
	lbs_convert(container_of(work, struct lbs_io, work), LBS_CTX_TASK);
}

static void lbs_convert_start(struct lbs_io *io, struct bio *in,
			      struct bio *out, enum lbs_ctx ctx)
{
	io->bio_in = in;
	io->iter_in = in->bi_iter;
	io->bio_out = out;
	io->iter_out = out->bi_iter;
	io->tag_index = 0;
	atomic_set(&io->pending, 1);
	lbs_convert(io, ctx);
}

static void lbs_read_crypt_work(struct work_struct *work)
{
	struct lbs_io *io = container_of(work, struct lbs_io, work);

	/* decrypt in place in the original bio's pages */
	lbs_convert_start(io, io->base, io->base, LBS_CTX_TASK);
}

/* Encrypt a write into bounce pages; task context, may sleep. */
static void lbs_write_crypt(struct lbs_io *io)
{
	struct lbs_config *cc = io->cc;

	io->clone = lbs_alloc_bounce(io, lbs_write_endio);
	if (io->atomic_pieces)
		lbs_bio_set_atomic(io->clone);
	if (cc->tuple_size && lbs_integrity_attach(io, io->clone, GFP_NOIO)) {
		DMERR_LIMIT("cannot attach the integrity metadata to a write");
		lbs_free_bounce(cc, io->clone);
		io->clone = NULL;
		lbs_fail(io, BLK_STS_IOERR);
		lbs_end_base(io);
		return;
	}
	lbs_convert_start(io, io->base, io->clone, LBS_CTX_TASK);
}

static void lbs_write_crypt_work(struct work_struct *work)
{
	lbs_write_crypt(container_of(work, struct lbs_io, work));
}

/* io_wq: a write's metadata buffer lbs_map() could not wait for, then on. */
static void lbs_write_tags_work(struct work_struct *work)
{
	struct lbs_io *io = container_of(work, struct lbs_io, work);

	lbs_integrity_wait(io);
	INIT_WORK(&io->work, lbs_write_crypt_work);
	queue_work(io->cc->crypt_wq, &io->work);
}

static void lbs_recheck_crypt_work(struct work_struct *work)
{
	struct lbs_io *io = container_of(work, struct lbs_io, work);

	lbs_convert_start(io, io->clone, io->clone, LBS_CTX_TASK);
}

static void lbs_recheck_endio(struct bio *clone)
{
	struct lbs_io *io = clone->bi_private;

	if (clone->bi_status) {
		lbs_fail(io, clone->bi_status);
		lbs_free_bounce(io->cc, clone);
		io->clone = NULL;
		lbs_end_base(io);
		return;
	}
	clone->bi_iter = io->recheck_iter;
	INIT_WORK(&io->work, lbs_recheck_crypt_work);
	queue_work(io->cc->crypt_wq, &io->work);
}

/*
 * io_wq: read a bio whose tags did not match again, into bounce pages of
 * its own (the bio is at most LBS_BOUNCE_SECTORS long: lbs_map()).
 */
static void lbs_recheck_work(struct work_struct *work)
{
	struct lbs_io *io = container_of(work, struct lbs_io, work);
	struct lbs_config *cc = io->cc;
	struct bio *clone;

	io->sector = io->first_sector;
	io->own_req_used = false;
	clone = lbs_alloc_bounce(io, lbs_recheck_endio);
	if (lbs_integrity_attach(io, clone, GFP_NOIO)) {
		DMERR_LIMIT("cannot attach the integrity metadata to a read");
		lbs_free_bounce(cc, clone);
		/* as dm-crypt: a read that cannot be set up is a resource error */
		lbs_fail(io, BLK_STS_RESOURCE);
		lbs_end_base(io);
		return;
	}
	io->clone = clone;
	io->recheck_iter = clone->bi_iter;
	dm_submit_bio_remap(io->base, clone);
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
	if (test_bit(LBS_OPT_NO_READ_WORKQUEUE, &io->cc->opts) &&
	    !in_hardirq() && !irqs_disabled()) {
		lbs_convert_start(io, io->base, io->base, LBS_CTX_ENDIO);
		return;
	}
	INIT_WORK(&io->work, lbs_read_crypt_work);
	queue_work(io->cc->crypt_wq, &io->work);
}

/*
 * Submit the read clone; false when gfp may not wait and memory would be
 * waited for (the caller queues lbs_read_submit_work), or on an error.
 */
static bool lbs_read_submit(struct lbs_io *io, gfp_t gfp)
{
	struct lbs_config *cc = io->cc;
	struct bio *clone;

	if (cc->tuple_size && !io->tags) {
		if (!gfpflags_allow_blocking(gfp))
			return false;
		lbs_integrity_wait(io);
	}
	clone = bio_alloc_clone(cc->dev->bdev, io->base, gfp, &cc->bs);
	if (!clone)
		return false;
	clone->bi_iter.bi_sector = cc->start + io->sector;
	if (cc->tuple_size && lbs_integrity_attach(io, clone, gfp)) {
		bio_put(clone);
		return false;
	}
	clone->bi_private = io;
	clone->bi_end_io = lbs_read_endio;
	dm_submit_bio_remap(io->base, clone);
	return true;
}

static void lbs_read_submit_work(struct work_struct *work)
{
	struct lbs_io *io = container_of(work, struct lbs_io, work);

	/* waits for memory; what fails now is no shortage of it */
	if (!lbs_read_submit(io, GFP_NOIO)) {
		DMERR_LIMIT("cannot attach the integrity metadata to a read");
		lbs_fail(io, BLK_STS_RESOURCE);
		lbs_end_base(io);
	}
}

int lbs_map(struct dm_target *ti, struct bio *bio)
{
	struct lbs_config *cc = ti->private;
	unsigned int max_sectors;
	struct lbs_io *io;
	sector_t offset;
	bool pieces;

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

	/* a key wiped between preresume and resume: never use the random key */
	if (unlikely(!test_bit(LBS_KEY_VALID, &cc->state))) {
		DMERR_LIMIT("I/O refused: the key was wiped; \"key set\" it while suspended");
		return DM_MAPIO_KILL;
	}

	/*
	 * A bio above the request cap is split; dm resubmits the rest.  The
	 * cap is below the bounce reserve: a write, or a read that may be
	 * read again into bounce pages (integrity), fits one bounce bio.
	 */
	BUILD_BUG_ON(LBS_MAX_REQUEST_DEFAULT >
		     LBS_BOUNCE_SECTORS << SECTOR_SHIFT);
	max_sectors = lbs_max_request_sectors(cc, bio);
	offset = dm_target_offset(ti, bio->bi_iter.bi_sector);
	pieces = cc->atomic_unit && bio_data_dir(bio) == WRITE &&
		 !lbs_bio_atomic(bio);
	/*
	 * Where the device writes whole sectors atomically: in such pieces,
	 * each a power of two (the block layer takes no other atomic write)
	 * even where max_write_size is not one.
	 */
	if (pieces) {
		max_sectors = min(max_sectors,
				  lbs_atomic_sectors(cc, bio, offset));
		max_sectors = rounddown_pow_of_two(max_sectors);
	}
	if (bio_sectors(bio) > max_sectors)
		dm_accept_partial_bio(bio, max_sectors);

	if (unlikely((offset & ((cc->sector_size >> SECTOR_SHIFT) - 1)) ||
		     (bio->bi_iter.bi_size & (cc->sector_size - 1))))
		return DM_MAPIO_KILL;

	io = dm_per_bio_data(bio, cc->per_io_size);
	io->cc = cc;
	io->base = bio;
	io->clone = NULL;
	io->sector = offset;
	io->first_sector = offset;
	io->error = BLK_STS_OK;
	io->tag_failed = false;
	io->rechecking = false;
	io->req = NULL;
	io->own_req_used = false;
	io->restart_wait = false;
	io->atomic_pieces = pieces;
	init_completion(&io->restart);
	/* zoned: a write ends its requests before the bio goes on */
	io->write_inline = cc->write_inline && bio_data_dir(bio) == WRITE;
	if (io->write_inline)
		init_completion(&io->req_done);
	/* may cut the bio to what one metadata pool entry covers */
	if (unlikely(!lbs_integrity_map(io, bio)))
		return DM_MAPIO_KILL;

	if (bio_data_dir(bio) == READ) {
		if (!lbs_read_submit(io, GFP_NOWAIT | __GFP_NOWARN)) {
			INIT_WORK(&io->work, lbs_read_submit_work);
			queue_work(cc->io_wq, &io->work);
		}
	} else if (cc->tuple_size && !io->tags) {
		INIT_WORK(&io->work, lbs_write_tags_work);
		queue_work(cc->io_wq, &io->work);
	} else if (test_bit(LBS_OPT_NO_WRITE_WORKQUEUE, &cc->opts) &&
		   in_task() && !irqs_disabled()) {
		lbs_write_crypt(io);
	} else {
		INIT_WORK(&io->work, lbs_write_crypt_work);
		queue_work(cc->crypt_wq, &io->work);
	}
	return DM_MAPIO_SUBMITTED;
}

/*
 * Layout of one crypto request, in req_pool and after struct lbs_io:
 *   skcipher_request + driver context | lbs_req | IV | scratch
 * or, with an AEAD cipher:
 *   aead_request + driver context | lbs_req | IV, original IV, sector
 * The IV part (lbs_req_dma_size()) starts and ends on a boundary of
 * LBS_DMA_ALIGN, wherever the element lies: a driver that maps it for DMA
 * on a machine without coherent caches shares no cache line with lbs_req,
 * which the CPU writes while the request is in flight.
 */
static void lbs_req_layout(struct lbs_config *cc)
{
	unsigned int off;

	if (cc->aead)
		off = sizeof(struct aead_request) +
		      crypto_aead_reqsize(cc->aead);
	else
		off = sizeof(struct skcipher_request) +
		      crypto_skcipher_reqsize(cc->tfms[0]);
	off = ALIGN(off, __alignof__(struct lbs_req));
	cc->req_lr_off = off;
	off += sizeof(struct lbs_req);
	cc->req_iv_off = off;
	cc->iv_align = max_t(unsigned int, cc->iv_align, LBS_DMA_ALIGN);
	off += cc->iv_align - 1 + ALIGN(lbs_req_dma_size(cc), LBS_DMA_ALIGN);
	off = ALIGN(off, CRYPTO_MINALIGN);
	cc->req_scratch_off = off;
	off += lbs_iv_scratch_size(cc);
	/*
	 * dm places the per-bio data just before the bio: its size must keep
	 * struct lbs_io aligned, or atomics on it fault (arm64: alignment
	 * fault with eboiv over lrw, whose scratch request has an odd size).
	 */
	cc->req_size = ALIGN(off, CRYPTO_MINALIGN);
	cc->per_io_size = LBS_IO_REQ_OFFSET + cc->req_size;
}

int lbs_io_init(struct dm_target *ti, struct lbs_config *cc)
{
	const char *dev = dm_table_device_name(ti->table);
	/* WQ_SYSFS: cpumask and nice of the workers tunable, as dm-crypt's */
	unsigned int flags = WQ_MEM_RECLAIM | WQ_SYSFS;
	int r;

	lbs_req_layout(cc);
	r = mempool_init_kmalloc_pool(&cc->req_pool, LBS_MIN_IOS, cc->req_size);
	if (r)
		goto nomem;
	r = lbs_bounce_init(cc);
	if (r)
		goto nomem;
	r = bioset_init(&cc->bs, LBS_MIN_IOS, 0, BIOSET_NEED_BVECS);
	if (r)
		goto nomem;
	/* the clones' integrity payloads, reserved like the clones */
	if (cc->tuple_size) {
		r = lbs_bioset_integrity_create(&cc->bs, LBS_MIN_IOS);
		if (r)
			goto nomem;
	}

	if (test_bit(LBS_OPT_HIGH_PRIORITY, &cc->opts))
		flags |= WQ_HIGHPRI;
	/*
	 * WQ_SYSFS names are sysfs directories: no '/', and unique while both
	 * tables of a reload live, hence the number.
	 */
	r = ida_alloc_min(&lbs_wq_ida, 1, GFP_KERNEL);
	if (r < 0)
		goto nomem;
	cc->wq_id = r;
	cc->io_wq = alloc_workqueue("kcryptd_lbs_io-%s-%d",
				    flags | LBS_WQ_PERCPU, 1, dev, cc->wq_id);
	if (test_bit(LBS_OPT_SAME_CPU_CRYPT, &cc->opts))
		cc->crypt_wq = alloc_workqueue("kcryptd_lbs-%s-%d",
					       flags | WQ_CPU_INTENSIVE |
					       LBS_WQ_PERCPU, 1, dev,
					       cc->wq_id);
	else
		cc->crypt_wq = alloc_workqueue("kcryptd_lbs-%s-%d",
					       flags | WQ_UNBOUND,
					       num_online_cpus(), dev,
					       cc->wq_id);
	if (!cc->io_wq || !cc->crypt_wq) {
		r = -ENOMEM;
		goto nomem;
	}
	r = lbs_writer_init(cc, dev);
	if (r)
		goto nomem;
	return 0;
nomem:
	ti->error = "Cannot allocate the I/O pools, workqueues and writer thread";
	return r;
}

/* Safe on a half-initialised (zeroed) config. */
void lbs_io_exit(struct lbs_config *cc)
{
	lbs_writer_exit(cc);
	if (cc->crypt_wq)
		destroy_workqueue(cc->crypt_wq);
	if (cc->io_wq)
		destroy_workqueue(cc->io_wq);
	if (cc->wq_id)
		ida_free(&lbs_wq_ida, cc->wq_id);
	bioset_exit(&cc->bs);
	lbs_bounce_exit(cc);
	mempool_exit(&cc->req_pool);
}
