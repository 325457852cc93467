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
 * Every page a device takes from the allocator is counted in that device,
 * from allocation to release, its pool reserve included.  The module-wide
 * bound lbs_bounce_limit is shared out evenly: past its share, a device
 * does not ask the allocator and only its reserve serves.  So at any time
 *   held(device) <= max(lbs_bounce_limit / devices, LBS_BOUNCE_PAGES)
 * and all devices together hold at most the bound plus one reserve each
 * (the share of the moment: when a device comes or the bound is lowered,
 * what another holds past its new share comes back as its writes end).
 * Nothing is shared per page between devices: each counts in its own
 * config, on a cache line apart from its read-mostly fields.
 */

#include <linux/bio.h>
#include <linux/gfp.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>

#include "dm-crypt-lbs.h"

static unsigned long lbs_bounce_limit;
/* the devices, for the totals the parameters show and for each's share */
static LIST_HEAD(lbs_bounce_devices);
static DEFINE_MUTEX(lbs_bounce_devices_lock);
static unsigned int lbs_bounce_nr_devices;

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
		 "bound on the bounce pages of all devices together, shared evenly (0: 2% of RAM); past its share a device writes from its own reserve of one bio");

/* The sum over the devices of the pages they hold now, or of their peaks. */
static long lbs_bounce_sum(bool peaks)
{
	struct lbs_config *cc;
	long total = 0;

	mutex_lock(&lbs_bounce_devices_lock);
	list_for_each_entry(cc, &lbs_bounce_devices, bounce_node)
		total += atomic_long_read(peaks ? &cc->bounce_peak :
					  &cc->bounce_held);
	mutex_unlock(&lbs_bounce_devices_lock);
	return total;
}

static int lbs_bounce_held_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%ld\n", lbs_bounce_sum(false));
}

static int lbs_bounce_peak_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%ld\n", lbs_bounce_sum(true));
}

/* Writing anything starts each device's peak again from what it holds. */
static int lbs_bounce_peak_set(const char *val, const struct kernel_param *kp)
{
	struct lbs_config *cc;

	mutex_lock(&lbs_bounce_devices_lock);
	list_for_each_entry(cc, &lbs_bounce_devices, bounce_node)
		atomic_long_set(&cc->bounce_peak,
				atomic_long_read(&cc->bounce_held));
	mutex_unlock(&lbs_bounce_devices_lock);
	return 0;
}

static const struct kernel_param_ops lbs_bounce_held_ops = {
	.get = lbs_bounce_held_get,
};

static const struct kernel_param_ops lbs_bounce_peak_ops = {
	.set = lbs_bounce_peak_set,
	.get = lbs_bounce_peak_get,
};
module_param_cb(bounce_pages, &lbs_bounce_held_ops, NULL, 0444);
MODULE_PARM_DESC(bounce_pages, "bounce pages all devices hold now");
module_param_cb(bounce_pages_peak, &lbs_bounce_peak_ops, NULL, 0644);
MODULE_PARM_DESC(bounce_pages_peak,
		 "sum of each device's most bounce pages held at once (write to restart from now)");

/* Count nr more pages if the device's share allows (always when !limited). */
static bool lbs_bounce_charge(struct lbs_config *cc, unsigned long nr,
			      bool limited)
{
	long held = atomic_long_add_return(nr, &cc->bounce_held);
	long peak = atomic_long_read(&cc->bounce_peak);

	if (limited) {
		unsigned int devices = max(1U, READ_ONCE(lbs_bounce_nr_devices));
		/* unsigned: a bound of 2^63 pages or more is no bound */
		unsigned long share = READ_ONCE(lbs_bounce_limit) / devices;

		if ((unsigned long)held > share) {
			atomic_long_sub(nr, &cc->bounce_held);
			return false;
		}
	}
	while (held > peak &&
	       !atomic_long_try_cmpxchg(&cc->bounce_peak, &peak, held))
		;
	return true;
}

static void lbs_bounce_uncharge(struct lbs_config *cc, unsigned long nr)
{
	atomic_long_sub(nr, &cc->bounce_held);
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

	if (!lbs_bounce_charge(cc, 1, READ_ONCE(cc->bounce_limited)))
		return NULL;
	page = alloc_page(gfp);
	if (!page)
		lbs_bounce_uncharge(cc, 1);
	return page;
}

static void lbs_page_free(void *element, void *data)
{
	__free_page(element);
	lbs_bounce_uncharge(data, 1);
}

/* A compound page of 2^order pages, without waiting, within the bound. */
static struct page *lbs_try_compound(struct lbs_config *cc,
				     unsigned int order)
{
	struct page *page;

	if (!lbs_bounce_charge(cc, 1UL << order, true))
		return NULL;
	/*
	 * Never from the emergency reserves: a writer in reclaim that converts
	 * inline (no_write_workqueue, a zoned device) must not drain them for
	 * pages the pool can give it one at a time.
	 */
	page = alloc_pages(GFP_NOWAIT | __GFP_NOMEMALLOC | __GFP_NORETRY |
			   __GFP_NOWARN | __GFP_COMP, order);
	if (!page)
		lbs_bounce_uncharge(cc, 1UL << order);
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
			lbs_bounce_uncharge(cc, 1UL << order);
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
				page = lbs_try_compound(cc, order);
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
	mutex_lock(&lbs_bounce_devices_lock);
	list_add_tail(&cc->bounce_node, &lbs_bounce_devices);
	WRITE_ONCE(lbs_bounce_nr_devices, lbs_bounce_nr_devices + 1);
	mutex_unlock(&lbs_bounce_devices_lock);
	/* the reserve is counted, but not bounded */
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
	if (cc->bounce_node.next) {
		mutex_lock(&lbs_bounce_devices_lock);
		list_del(&cc->bounce_node);
		WRITE_ONCE(lbs_bounce_nr_devices, lbs_bounce_nr_devices - 1);
		mutex_unlock(&lbs_bounce_devices_lock);
		/* every page came back: a clone leaked otherwise */
		WARN_ON_ONCE(atomic_long_read(&cc->bounce_held));
	}
	mutex_destroy(&cc->bounce_lock);
}
