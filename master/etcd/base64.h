/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * base64.h - standard base64 (RFC 4648 section 4, with padding), as etcd's
 * JSON gateway carries keys and values.  Binary-safe; no line breaks.
 */
#ifndef TAPSTRIPE_ETCD_BASE64_H
#define TAPSTRIPE_ETCD_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Characters etcd_base64_encode writes for len bytes, the NUL excluded. */
#define ETCD_BASE64_LEN(len) ((((len) + 2) / 3) * 4)

/*
 * Encode len bytes of data into out, which holds ETCD_BASE64_LEN(len) + 1
 * characters (NUL-terminated).  len must be below SIZE_MAX / 4 * 3.
 */
void etcd_base64_encode(const void *data, size_t len, char *out);

/*
 * Decode text (len characters, padding required: a length that is a
 * multiple of 4) into out, which holds len / 4 * 3 bytes; *out_len gets the
 * bytes written.  0, or -EINVAL for a character outside the alphabet,
 * padding anywhere but at the end, a bad length, or non-zero bits left
 * over in the last character (a text no encoder writes).
 */
int etcd_base64_decode(const char *text, size_t len, uint8_t *out,
		       size_t *out_len);

#endif
