/* SPDX-License-Identifier: BSD-3-Clause */
/* base64.c - RFC 4648 base64 for etcd's JSON gateway (see base64.h). */
#include "config.h"

#include <errno.h>

#include "master/etcd/base64.h"

static const char etcd_b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void etcd_base64_encode(const void *data, size_t len, char *out)
{
	const uint8_t *in = data;
	uint32_t word;
	size_t i;

	for (i = 0; i + 3 <= len; i += 3) {
		word = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 |
		       in[i + 2];
		*out++ = etcd_b64_alphabet[word >> 18];
		*out++ = etcd_b64_alphabet[(word >> 12) & 63];
		*out++ = etcd_b64_alphabet[(word >> 6) & 63];
		*out++ = etcd_b64_alphabet[word & 63];
	}
	if (len - i == 1) {
		word = (uint32_t)in[i] << 16;
		*out++ = etcd_b64_alphabet[word >> 18];
		*out++ = etcd_b64_alphabet[(word >> 12) & 63];
		*out++ = '=';
		*out++ = '=';
	} else if (len - i == 2) {
		word = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		*out++ = etcd_b64_alphabet[word >> 18];
		*out++ = etcd_b64_alphabet[(word >> 12) & 63];
		*out++ = etcd_b64_alphabet[(word >> 6) & 63];
		*out++ = '=';
	}
	*out = '\0';
}

/* The 6-bit value of c, or -1 for a character outside the alphabet. */
static int etcd_b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* The padding of the last quantum (0..2), or -EINVAL when misplaced. */
static int etcd_b64_padding(const char *q)
{
	if (q[3] != '=')
		return q[2] == '=' ? -EINVAL : 0;
	return q[2] == '=' ? 2 : 1;
}

int etcd_base64_decode(const char *text, size_t len, uint8_t *out,
		       size_t *out_len)
{
	size_t i, n = 0;
	uint32_t word;
	int pad = 0, k, v;

	if (len % 4)
		return -EINVAL;
	for (i = 0; i < len; i += 4) {
		if (i + 4 == len) {
			pad = etcd_b64_padding(text + i);
			if (pad < 0)
				return pad;
		}
		word = 0;
		for (k = 0; k < 4 - pad; k++) {
			v = etcd_b64_value(text[i + k]);
			if (v < 0)
				return -EINVAL;
			word |= (uint32_t)v << (18 - 6 * k);
		}
		/* Bits below the last whole byte must be zero (canonical). */
		if ((pad == 1 && (word & 0xff)) ||
		    (pad == 2 && (word & 0xffff)))
			return -EINVAL;
		out[n++] = word >> 16;
		if (pad < 2)
			out[n++] = (word >> 8) & 0xff;
		if (pad < 1)
			out[n++] = word & 0xff;
	}
	*out_len = n;
	return 0;
}
