/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-pattern.c - the verification pattern (layout in
 * td-front-lib.h).  tests/integration/shm-pattern.py computes the same
 * sectors independently; change both or neither.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "tools/td-front/td-front-lib.h"

#define SECTOR	       TDF_SECTOR_SIZE
#define HEADER_WORDS   4
#define WORDS	       (SECTOR / sizeof(uint64_t))
#define SPLITMIX_GAMMA UINT64_C(0x9e3779b97f4a7c15)
#define SPLITMIX_MUL1  UINT64_C(0xbf58476d1ce4e5b9)
#define SPLITMIX_MUL2  UINT64_C(0x94d049bb133111eb)

/* splitmix64's finaliser: every input bit changes about half the output. */
static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * SPLITMIX_MUL1;
	z = (z ^ (z >> 27)) * SPLITMIX_MUL2;
	return z ^ (z >> 31);
}

uint64_t tdf_pattern_word(uint64_t offset, uint64_t generation, uint64_t seed)
{
	return mix(offset + SPLITMIX_GAMMA * (generation + 1) + mix(seed));
}

/* Little-endian whatever the host (the file is read by other tools). */
static void put_le64(unsigned char *p, uint64_t v)
{
	for (unsigned int i = 0; i < sizeof(v); i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < sizeof(v); i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void fill_sector(unsigned char *s, uint64_t offset, uint64_t gen,
			uint64_t seed)
{
	uint64_t w = tdf_pattern_word(offset, gen, seed);

	put_le64(s, TDF_PATTERN_MAGIC);
	put_le64(s + 8, offset);
	put_le64(s + 16, gen);
	put_le64(s + 24, seed);
	for (unsigned int i = 0; i < WORDS - HEADER_WORDS; i++)
		put_le64(s + (HEADER_WORDS + i) * 8, w + i);
}

void tdf_pattern_fill(void *buf, uint64_t offset, uint32_t len,
		      uint64_t generation, uint64_t seed)
{
	unsigned char *p = buf;

	for (uint32_t done = 0; done + SECTOR <= len; done += SECTOR)
		fill_sector(p + done, offset + done, generation, seed);
}

int tdf_pattern_check(const void *buf, uint64_t offset, uint32_t len,
		      uint64_t generation, uint64_t seed,
		      struct tdf_mismatch *bad)
{
	const unsigned char *p = buf;
	unsigned char want[SECTOR];

	for (uint32_t done = 0; done + SECTOR <= len; done += SECTOR) {
		const unsigned char *s = p + done;

		fill_sector(want, offset + done, generation, seed);
		if (!memcmp(s, want, SECTOR))
			continue;
		memset(bad, 0, sizeof(*bad));
		bad->offset = offset + done;
		bad->bad_magic = get_le64(s) != TDF_PATTERN_MAGIC;
		bad->found_offset = get_le64(s + 8);
		bad->found_generation = get_le64(s + 16);
		bad->found_seed = get_le64(s + 24);
		return -EILSEQ;
	}
	return 0;
}
