/*
 * pagestate.h - who saves each page of a copy-on-write snapshot, decided once.
 *
 *   PROTECTED --writer claims--> CLAIMED --writer wrote it--> SAVED
 *   PROTECTED --fault copies---> COPIED  --writer wrote the copy--> SAVED
 *   ZERO: not present at the snapshot instant; saved as a hole, never copied.
 *
 * Every transition out of PROTECTED is a compare-and-swap, so exactly one of the
 * writer and the fault handler takes a page, and the image gets each page once.
 */
#ifndef CCVM_PAGESTATE_H
#define CCVM_PAGESTATE_H

#include <stdbool.h>
#include <stdint.h>

enum page_state { PS_PROTECTED = 0, PS_CLAIMED, PS_COPIED, PS_SAVED, PS_ZERO };

static inline bool ps_take(uint8_t *st, enum page_state to)
{
	uint8_t expect = PS_PROTECTED;

	return __atomic_compare_exchange_n(st, &expect, (uint8_t)to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

static inline enum page_state ps_get(const uint8_t *st)
{
	return (enum page_state)__atomic_load_n(st, __ATOMIC_ACQUIRE);
}

static inline void ps_set(uint8_t *st, enum page_state s)
{
	__atomic_store_n(st, (uint8_t)s, __ATOMIC_RELEASE);
}

#endif
