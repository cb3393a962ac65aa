/*
 * heat.h - which 4 KiB pages of guest memory were written recently, ranked: an age
 * byte per page (heat.c). The coverage tracker folds in every snapshot's own
 * observation and marks the sampled pages its windows saw written; a snapshot copies
 * the hottest pages while it is paused.
 */
#ifndef CCVM_HEAT_H
#define CCVM_HEAT_H

#include <stdint.h>

/* A page written in the last observation has its top bit set; older writes fade out,
 * one bit per observation, 8 remembered: a page written in any of them ranks at least
 * HEAT_MIN. */
#define HEAT_WRITTEN 0x80u
#define HEAT_MIN 1u

struct page_heat {
	uint64_t pages;
	uint8_t *age;           /* per page: bit 7 the last observation, bit 6 the one before... */
	uint64_t observations;  /* folded in so far */
};

/* For @pages pages, none written yet: 0 or -ENOMEM. */
int heat_init(struct page_heat *h, uint64_t pages);
void heat_fini(struct page_heat *h);

/* One observation: @written has a bit per page written during it, @watched (NULL:
 * every page) a bit per page it could have seen written. Every page ages by one; a
 * watched page written becomes the hottest. */
void heat_fold(struct page_heat *h, const uint64_t *written, const uint64_t *watched);

/* A partial observation: @page was seen written (a sampled window's page); it ranks
 * as written in the last observation, and nothing ages. */
void heat_mark(struct page_heat *h, uint64_t page);

/* The pages whose age is at least @min, hottest first (address order within one age),
 * into @out, at most @max of them; returns how many. */
uint64_t heat_rank(const struct page_heat *h, unsigned min, uint32_t *out, uint64_t max);

#endif
