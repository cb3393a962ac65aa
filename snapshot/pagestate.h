/*
 * pagestate.h - who saves each page of a copy-on-write snapshot, decided once.
 *
 *   PROTECTED --writer staged it-------> SAVED
 *   PROTECTED --copied to the pool----> COPYING --copy[] set--> COPIED --writer--> SAVED
 *                                              COPIED --compressed--> PACKED --writer--> SAVED
 *   PROTECTED --copied, no pool left--> CLAIMED --saved by the copier--> SAVED
 *   ZERO: not present at the snapshot instant; saved as a hole, never copied.
 *   PARENT: an incremental snapshot does not hold it (unwritten since the parent's
 *   instant: the parent's page stands); never copied, never saved.
 *   PACKED: its copy is held compressed (squeeze.c), decided per chunk with the writer.
 *
 * Every transition out of PROTECTED is a compare-and-swap made after the page's bytes
 * were copied somewhere, so exactly one of the writer, the fault handlers and the
 * copier takes a page, the image gets each page once, and a page is never unprotected
 * before its contents at the instant are safe: a page still PROTECTED when taken
 * cannot have been written since the instant (the write would have trapped and taken
 * it first), so bytes copied before the take are the instant's.
 */
#ifndef CCVM_PAGESTATE_H
#define CCVM_PAGESTATE_H

#include <stdbool.h>
#include <stdint.h>

enum page_state { PS_PROTECTED = 0, PS_CLAIMED, PS_COPIED, PS_SAVED, PS_ZERO, PS_COPYING,
		  PS_PARENT, PS_PACKED };

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
