// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: bounce pages, the buffers writes are encrypted into.
 *
 * A write clone takes its pages in as few allocations as the page allocator
 * gives without waiting (compound pages up to PAGE_ALLOC_COSTLY_ORDER), the
 * rest one page at a time from the device's page pool.  The pool keeps a
 * reserve of one write's pages (LBS_BOUNCE_PAGES), so a write always gets
 * its pages in the end: when memory is short, writers drain the reserve
 * one at a time and every other holder gives its pages back when its write
 * completes.
 *
 * Every page taken from the allocator is counted across all devices, from
 * allocation to release, pool reserves included; past lbs_bounce_limit the
 * allocator is not asked and only the reserves serve.  So at any time
 *   lbs_bounce_pages <= lbs_bounce_limit + devices * LBS_BOUNCE_PAGES.
 */

#include <linux/bio.h>
#include <linux/gfp.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/module.h>

#include "dm-crypt-lbs.h"

static atomic_long_t lbs_bounce_pages = ATOMIC_LONG_INIT(0);
static atomic_long_t lbs_bounce_peak = ATOMIC_LONG_INIT(0);
static unsigned long lbs_bounce_limit;

/* The default bound: 2% of RAM, at least four writes' worth. */
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

/* The bound in effect, also before the first device has set the default. */
static int lbs_bounce_limit_get(char *buf, const struct kernel_param *kp)
{
	unsigned long pages = READ_ONCE(lbs_bounce_limit);

	return scnprintf(buf, PAGE_SIZE, "%lu\n",
			 pages ? pages : lbs_bounce_default());
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

/* Count nr more pages if the bound allows (always when !limited). */
static bool lbs_bounce_charge(unsigned long nr, bool limited)
{
	long held = atomic_long_add_return(nr, &lbs_bounce_pages);
	long peak = atomic_long_read(&lbs_bounce_peak);

	if (limited && held > (long)READ_ONCE(lbs_bounce_limit)) {
		atomic_long_sub(nr, &lbs_bounce_pages);
		return false;
	}
	while (held > peak &&
	       !atomic_long_try_cmpxchg(&lbs_bounce_peak, &peak, held))
		;
	return true;
}

static void lbs_bounce_uncharge(unsigned long nr)
{
	atomic_long_sub(nr, &lbs_bounce_pages);
}

/*
 * The page pool's allocator.  Once the pool is filled (bounce_limited),
 * a page past the bound is refused, and mempool_alloc() falls back to the
 * pool's reserve or waits for a page to come back.
 */
static void *lbs_page_alloc(gfp_t gfp, void *data)
{
	struct lbs_config *cc = data;
	struct page *page;

	if (!lbs_bounce_charge(1, READ_ONCE(cc->bounce_limited)))
		return NULL;
	page = alloc_page(gfp);
	if (!page)
		lbs_bounce_uncharge(1);
	return page;
}

static void lbs_page_free(void *element, void *data)
{
	__free_page(element);
	lbs_bounce_uncharge(1);
}

/* A compound page of 2^order pages, without waiting, within the bound. */
static struct page *lbs_try_compound(unsigned int order)
{
	struct page *page;

	if (!lbs_bounce_charge(1UL << order, true))
		return NULL;
	page = alloc_pages(GFP_NOWAIT | __GFP_NORETRY | __GFP_NOWARN |
			   __GFP_COMP, order);
	if (!page)
		lbs_bounce_uncharge(1UL << order);
	return page;
}

void lbs_free_bounce(struct lbs_config *cc, struct bio *clone)
{
	unsigned short i;

	/* one page, or one compound page, per vector: never merged */
	for (i = 0; i < clone->bi_vcnt; i++) {
		struct page *page = clone->bi_io_vec[i].bv_page;
		unsigned int order = compound_order(page);

		if (order) {
			__free_pages(page, order);
			lbs_bounce_uncharge(1UL << order);
		} else {
			mempool_free(page, &cc->page_pool);
		}
	}
	bio_put(clone);
}

/*
 * Fill a clone of size bytes.  gfp is that of the single pages from the
 * pool; compound pages are tried first while gfp may not wait, and while
 * what is left is worth one.  False when a single page is not to be had
 * (only where gfp may not wait).
 */
static bool lbs_fill_bounce(struct lbs_config *cc, struct bio *clone,
			    unsigned int size, gfp_t gfp, bool compound)
{
	unsigned int order = min_t(unsigned int, PAGE_ALLOC_COSTLY_ORDER,
				   get_order(size));

	while (size) {
		struct page *page = NULL;
		unsigned int len;

		while (compound && order && !page) {
			if ((PAGE_SIZE << order) <= size)
				page = lbs_try_compound(order);
			if (!page)
				order--;
		}
		if (!page) {
			compound = false;
			page = mempool_alloc(&cc->page_pool, gfp);
			if (!page)
				return false;
		}
		len = min_t(unsigned int, size, page_size(page));
		__bio_add_page(clone, page, len, 0);
		size -= len;
	}
	return true;
}

static struct bio *lbs_new_clone(struct lbs_io *io, bio_end_io_t *end_io)
{
	struct lbs_config *cc = io->cc;
	unsigned int size = io->base->bi_iter.bi_size;
	struct bio *clone;

	clone = bio_alloc_bioset(cc->dev->bdev, DIV_ROUND_UP(size, PAGE_SIZE),
				 io->base->bi_opf, GFP_NOIO, &cc->bs);
	clone->bi_private = io;
	clone->bi_end_io = end_io;
	clone->bi_ioprio = io->base->bi_ioprio;
	clone->bi_iter.bi_sector = cc->start + io->sector;
	return clone;
}

/*
 * A write clone with bounce pages for the whole bio.  Without waiting if
 * memory allows; otherwise from the reserve, one writer at a time (the
 * reserve holds one bio's pages; every other holder gives its pages back
 * when its write ends).  Process context; may sleep.
 */
struct bio *lbs_alloc_bounce(struct lbs_io *io, bio_end_io_t *end_io)
{
	struct lbs_config *cc = io->cc;
	unsigned int size = io->base->bi_iter.bi_size;
	struct bio *clone;

	clone = lbs_new_clone(io, end_io);
	if (lbs_fill_bounce(cc, clone, size, GFP_NOWAIT | __GFP_NOWARN, true))
		return clone;
	lbs_free_bounce(cc, clone);

	mutex_lock(&cc->bounce_lock);
	clone = lbs_new_clone(io, end_io);
	/* single pages waiting for the reserve: never fails */
	lbs_fill_bounce(cc, clone, size, GFP_NOIO, false);
	mutex_unlock(&cc->bounce_lock);
	return clone;
}

int lbs_bounce_init(struct lbs_config *cc)
{
	int r;

	if (!READ_ONCE(lbs_bounce_limit))
		WRITE_ONCE(lbs_bounce_limit, lbs_bounce_default());
	mutex_init(&cc->bounce_lock);
	r = mempool_init(&cc->page_pool, LBS_BOUNCE_PAGES, lbs_page_alloc,
			 lbs_page_free, cc);
	if (r)
		return r;
	WRITE_ONCE(cc->bounce_limited, true);
	return 0;
}

/* Safe on a zeroed config. */
void lbs_bounce_exit(struct lbs_config *cc)
{
	mempool_exit(&cc->page_pool);
	mutex_destroy(&cc->bounce_lock);
}
