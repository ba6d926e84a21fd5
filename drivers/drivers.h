/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * drivers.h - the block drivers tapstripe ships, and the table of them.
 *
 * Only programs' main() and tests include this: the core never knows the
 * drivers, it receives td_driver_table from its caller.
 */
#ifndef TAPSTRIPE_DRIVERS_H
#define TAPSTRIPE_DRIVERS_H

#include "tapdisk/driver.h"

extern const struct td_driver_ops td_null_ops;
extern const struct td_driver_ops td_aio_ops;
extern const struct td_driver_ops td_sort_ops;
extern const struct td_driver_ops td_stripe_ops;
extern const struct td_driver_ops td_qos_ops;
extern const struct td_driver_ops td_cbt_ops;

/* NULL-terminated, for td_vbd_open(). */
extern const struct td_driver_ops *const td_driver_table[];

#endif
