/*
 * heat.c - recently written pages, ranked by an age byte per page.
 *
 * This is the aging of page-replacement algorithms turned round: each observation (a
 * dirty-log window, or what a snapshot saw the guest write) shifts every page's byte
 * right by one and sets the top bit of the pages written in it, so a byte read as a
 * number ranks pages by how recently, then how often, they were written. A page
 * written in the last observation outranks every page that was not, which is what a
 * snapshot wants: the pages about to be written again are mostly those just written.
 * One byte per 4 KiB page (0.02% of memory) is the whole cost; ranking is a counting
 * sort over the 256 ages, two passes over the bytes, with no allocation.
 */
#include "heat.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define HEAT_AGES 256

int heat_init(struct page_heat *h, uint64_t pages)
{
	memset(h, 0, sizeof(*h));
	h->pages = pages;
	h->age = calloc(pages ? pages : 1, 1);
	return h->age ? 0 : -ENOMEM;
}

void heat_fini(struct page_heat *h)
{
	free(h->age);
	h->age = NULL;
}

static bool heat_bit(const uint64_t *bits, uint64_t p)
{
	return bits[p / 64] >> (p % 64) & 1;
}

void heat_fold(struct page_heat *h, const uint64_t *written, const uint64_t *watched)
{
	for (uint64_t p = 0; p < h->pages; p++) {
		uint8_t a = h->age[p] >> 1;

		if ((!watched || heat_bit(watched, p)) && heat_bit(written, p))
			a |= HEAT_WRITTEN;
		h->age[p] = a;
	}
	h->observations++;
}

void heat_mark(struct page_heat *h, uint64_t page)
{
	if (page < h->pages)
		h->age[page] |= HEAT_WRITTEN;
}

uint64_t heat_rank(const struct page_heat *h, unsigned min, uint32_t *out, uint64_t max)
{
	uint64_t count[HEAT_AGES] = { 0 }, at[HEAT_AGES], n = 0;

	if (!min)
		min = 1; /* never written: no rank */
	for (uint64_t p = 0; p < h->pages; p++)
		count[h->age[p]]++;
	/* Hottest age first: where each age's pages start in @out. */
	for (unsigned a = HEAT_AGES; a-- > min;) {
		at[a] = n;
		n += count[a];
	}
	if (!max)
		return 0;
	for (uint64_t p = 0; p < h->pages; p++) {
		unsigned a = h->age[p];

		if (a >= min && at[a] < max)
			out[at[a]++] = (uint32_t)p;
	}
	return n < max ? n : max;
}
