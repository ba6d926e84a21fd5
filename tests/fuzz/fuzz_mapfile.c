/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_mapfile.c - libFuzzer harness for the mapping-file reader
 * (drivers/stripe/map/map*.c: stripe_map_parse and the checks behind it).
 *
 * Input: one mode byte, then the file's text.  Mode bit 0 set: the harness
 * appends the right "checksum crc32c XXXXXXXX" line itself ("seals" the
 * text), so that mutations reach the rules behind the checksum instead of
 * all dying on it; clear: the text is parsed as it is (the checksum, the
 * truncation and NUL rules).
 *
 * Checked (a failure aborts, which libFuzzer reports):
 *   - stripe_map_parse returns 0 or -EINVAL, nothing else;
 *   - a rejection leaves the map empty and says why (a line number inside
 *     the file, a non-empty reason);
 *   - an accepted map passes stripe_map_check, is written back by
 *     stripe_map_format, and that text parses to the same map (dirty
 *     regions and move targets included) and formats to the same text
 *     again (the writer and the reader agree), with the version the map
 *     needs; stripe_map_copy of it formats to the same text;
 *   - its layout places the first and the last byte of the disk inside
 *     its geometry;
 *   - the sanitizers and libFuzzer's leak check see nothing.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/stripe/map/map.h"
#include "common/json.h"
#include "common/log.h"

#define MODE_SEAL 0x01
/* "checksum crc32c " + 8 hex digits + "\n" + NUL */
#define SEAL_BYTES 32

#define check(cond)                                                   \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "check failed: %s\n", #cond); \
			abort();                                      \
		}                                                     \
	} while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	return 0;
}

static unsigned int count_lines(const char *text, size_t len)
{
	unsigned int n = 0;

	for (size_t i = 0; i < len; i++)
		n += text[i] == '\n';
	return n;
}

static bool same_server(const struct stripe_map_server *a,
			const struct stripe_map_server *b)
{
	return !strcmp(a->address, b->address) &&
	       !strcmp(a->portal, b->portal) && !strcmp(a->target, b->target) &&
	       a->lun == b->lun && a->block_size == b->block_size &&
	       !strcmp(a->chap_user, b->chap_user) &&
	       !strcmp(a->chap_secret, b->chap_secret);
}

static size_t bitmap_bytes(const struct stripe_map *m)
{
	return stripe_map_nr_slots(m) * stripe_map_region_words(m) *
	       sizeof(uint64_t);
}

static bool same_map(const struct stripe_map *a, const struct stripe_map *b)
{
	if (strcmp(a->vdisk, b->vdisk) || strcmp(a->master, b->master) ||
	    a->size_bytes != b->size_bytes ||
	    a->stripe_unit_bytes != b->stripe_unit_bytes ||
	    a->extent_size_bytes != b->extent_size_bytes ||
	    a->columns != b->columns ||
	    a->extents_per_column != b->extents_per_column ||
	    a->replicas != b->replicas || a->nr_servers != b->nr_servers ||
	    a->region_bytes != b->region_bytes)
		return false;
	for (uint32_t s = 0; s < a->nr_servers; s++)
		if (!same_server(&a->servers[s], &b->servers[s]))
			return false;
	for (size_t i = 0; i < stripe_map_nr_slots(a); i++)
		if (a->slots[i].server != b->slots[i].server ||
		    a->slots[i].lba != b->slots[i].lba ||
		    a->slots[i].stale != b->slots[i].stale ||
		    a->moves[i].active != b->moves[i].active ||
		    (a->moves[i].active &&
		     (a->moves[i].server != b->moves[i].server ||
		      a->moves[i].lba != b->moves[i].lba)))
			return false;
	return !memcmp(a->dirty, b->dirty, bitmap_bytes(a)) &&
	       !memcmp(a->move_dirty, b->move_dirty, bitmap_bytes(a));
}

static void check_layout(const struct stripe_map *m)
{
	const uint64_t probes[] = {0, m->size_bytes - 1,
				   m->size_bytes / 2 & ~511ull};
	struct stripe_layout l;
	struct stripe_loc loc;

	stripe_map_layout(m, &l);
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		stripe_layout_locate(&l, probes[i], &loc);
		check(loc.column < m->columns);
		check(loc.extent < m->extents_per_column);
		check(loc.extent_offset < m->extent_size_bytes);
	}
}

/* The copy formats to the same text. */
static void check_copy(const struct stripe_map *m, const struct td_strbuf *text)
{
	struct stripe_map copy;
	struct stripe_map_error err;
	struct td_strbuf text3;

	check(stripe_map_copy(&copy, m) == 0);
	check(same_map(m, &copy));
	td_strbuf_init(&text3);
	check(stripe_map_format(&copy, &text3, &err) == 0);
	check(text3.len == text->len &&
	      !memcmp(text3.data, text->data, text->len));
	td_strbuf_free(&text3);
	stripe_map_free(&copy);
}

/* An accepted map: check, write back, read again, write again. */
static void round_trip(const struct stripe_map *m)
{
	struct stripe_map again;
	struct stripe_map_error err;
	struct td_strbuf text, text2;

	check(stripe_map_check(m, &err) == 0);
	check_layout(m);
	td_strbuf_init(&text);
	td_strbuf_init(&text2);
	check(stripe_map_format(m, &text, &err) == 0);
	check(stripe_map_parse(text.data, text.len, &again, &err) == 0);
	check(same_map(m, &again));
	check(stripe_map_format(&again, &text2, &err) == 0);
	check(text.len == text2.len &&
	      !memcmp(text.data, text2.data, text.len));
	check(memcmp(text.data, "tapstripe-map ", 14) == 0 &&
	      text.data[14] - '0' == stripe_map_format_version(m));
	check_copy(m, &text);
	stripe_map_free(&again);
	td_strbuf_free(&text);
	td_strbuf_free(&text2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stripe_map m;
	struct stripe_map_error err;
	size_t len;
	char *text;
	int ret;

	if (!size)
		return 0;
	len = size - 1;
	/* A copy of its own, so that ASan sees any read past the end. */
	text = malloc(len + SEAL_BYTES);
	check(text);
	memcpy(text, data + 1, len);
	if (data[0] & MODE_SEAL)
		len += (size_t)snprintf(text + len, SEAL_BYTES,
					"checksum crc32c %08x\n",
					stripe_map_crc32c(0, text, len));
	ret = stripe_map_parse(text, len, &m, &err);
	check(ret == 0 || ret == -EINVAL);
	if (ret) {
		check(!m.servers && !m.slots && !m.dirty && !m.moves &&
		      !m.move_dirty);
		check(err.reason[0] != '\0');
		check(memchr(err.reason, '\0', sizeof(err.reason)));
		check(err.line <= count_lines(text, len) + 1);
	} else {
		round_trip(&m);
		stripe_map_free(&m);
	}
	free(text);
	return 0;
}
