/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen-ring.h - Xen's public blkif and ring headers, made usable in user
 * space.  Include this, never <xen/io/blkif.h> directly.
 *
 * ring.h leaves the memory barriers to its includer.  The ring is shared
 * with another CPU (a guest, or a frontend process over shm), so:
 *   - xen_rmb: loads before it (a producer index) are ordered before loads
 *     after it (the slots that index covers): an acquire fence;
 *   - xen_wmb: stores before it (responses) are ordered before stores after
 *     it (the producer index): a release fence;
 *   - xen_mb: a store (req_event, rsp_prod) ordered before a later load
 *     (req_prod, rsp_event): only a sequentially consistent fence orders
 *     store-load (mfence on x86).
 * The GCC and clang builtins behind these fences are also compiler
 * barriers for plain loads and stores, which the ring macros use.
 */
#ifndef TAPSTRIPE_XEN_RING_H
#define TAPSTRIPE_XEN_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define xen_mb()  atomic_thread_fence(memory_order_seq_cst)
#define xen_rmb() atomic_thread_fence(memory_order_acquire)
#define xen_wmb() atomic_thread_fence(memory_order_release)

/*
 * Without a version, xen-compat.h picks the legacy interface, whose ring.h
 * defines xen_mb() as the kernel's mb(), which user space lacks.  Any
 * interface from 0x00030208 on leaves the barriers to us; 4.14 is what we
 * ask for, and the 4.17 headers of Debian 12 accept it.
 */
#ifndef __XEN_INTERFACE_VERSION__
#define __XEN_INTERFACE_VERSION__ 0x00040e00
#endif

#include <xen/io/blkif.h>
#include <xen/io/protocols.h>

/* Xen grants pages of 4 KiB whatever the host's page size. */
#define BLKIF_PAGE_SIZE 4096u

#endif
