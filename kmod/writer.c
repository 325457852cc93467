// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-crypt-lbs: the writer thread.  Encrypted writes wait in write_tree, by
 * sector, and one thread per device submits them in sector order under a
 * plug, so the backing device sees them merged and in order however the
 * crypto driver or the crypt workers reordered them.  The thread never
 * allocates memory: it cannot wait behind I/O that waits for memory.
 */

#include <linux/blkdev.h>
#include <linux/kthread.h>
#include <linux/rbtree.h>
#include <linux/sched.h>
#include <linux/spinlock.h>

#include "dm-crypt-lbs.h"

/* Queue an encrypted write for the writer thread.  Any context. */
void lbs_queue_write(struct lbs_io *io)
{
	struct lbs_config *cc = io->cc;
	sector_t sector = io->clone->bi_iter.bi_sector;
	struct rb_node **link, *parent = NULL;
	unsigned long flags;
	bool was_empty;

	spin_lock_irqsave(&cc->write_lock, flags);
	was_empty = RB_EMPTY_ROOT(&cc->write_tree);
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
	/*
	 * Woken under the lock: once it is dropped the thread may submit this
	 * write, the write complete, and the device be removed (the destructor
	 * stops the thread and frees cc), so nothing of cc may be touched
	 * after the unlock.  A tree that was not empty has had its wake-up: the
	 * thread empties the tree under this lock before it sleeps again.
	 */
	if (was_empty)
		wake_up_process(cc->write_thread);
	spin_unlock_irqrestore(&cc->write_lock, flags);
}

/* Takes every queued write at once and submits them in sector order. */
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
			struct lbs_io *io = rb_entry(node, struct lbs_io, rb_node);

			rb_erase(node, &tree);
			dm_submit_bio_remap(io->base, io->clone);
			cond_resched();
		}
		blk_finish_plug(&plug);
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

int lbs_writer_init(struct lbs_config *cc, const char *dev)
{
	spin_lock_init(&cc->write_lock);
	cc->write_tree = RB_ROOT;
	cc->write_thread = kthread_run(lbs_write_thread, cc, "kcryptd_lbs_w/%s",
				       dev);
	if (IS_ERR(cc->write_thread)) {
		int r = PTR_ERR(cc->write_thread);

		cc->write_thread = NULL;
		return r;
	}
	/* high_priority: the writer as urgent as the crypt workers (WQ_HIGHPRI) */
	if (test_bit(LBS_OPT_HIGH_PRIORITY, &cc->opts))
		set_user_nice(cc->write_thread, MIN_NICE);
	return 0;
}

/* No I/O is in flight: the tree is empty.  Safe on a zeroed config. */
void lbs_writer_exit(struct lbs_config *cc)
{
	if (cc->write_thread)
		kthread_stop(cc->write_thread);
	cc->write_thread = NULL;
}
