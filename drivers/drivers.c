/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * drivers.c - the one explicit table of block drivers (no constructors:
 * they vanish from static archives).
 */
#include "config.h"

#include "drivers/drivers.h"

const struct td_driver_ops *const td_driver_table[] = {
	&td_aio_ops,	/* aio:/path */
	&td_null_ops,	/* null:size=SIZE */
	&td_sort_ops,	/* sort|LOWER */
	&td_stripe_ops, /* stripe:/path.map */
	&td_qos_ops,	/* qos:LIMITS|LOWER */
	&td_cbt_ops,	/* cbt[:dir=PATH]|LOWER */
	NULL,
};
