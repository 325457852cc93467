// SPDX-License-Identifier: GPL-2.0-only
/*
 * WQ_PERCPU names a per-CPU workqueue (7.2, and 6.12 stable; not 6.1); 7.2 warns at a workqueue
 * with neither it nor WQ_UNBOUND.
 */
#include <linux/workqueue.h>

static const unsigned int lbs_test_flags = WQ_PERCPU | WQ_MEM_RECLAIM;
