/*
 * bits.h - bitmaps of pages (a bit per page, in 64-bit words), as the dirty log, the
 * pre-copy rounds and a migration's stream keep them: test, set and clear a range, and
 * walk the runs of pages whose bit is set (or clear), a word at a time where it can.
 */
#ifndef CCVM_BITS_H
#define CCVM_BITS_H

#include <stdbool.h>
#include <stdint.h>

static inline bool bits_test(const uint64_t *b, uint64_t i)
{
	return b[i / 64] >> (i % 64) & 1;
}

static inline void bits_set(uint64_t *b, uint64_t first, uint64_t n)
{
	for (uint64_t i = first; i < first + n; i++)
		b[i / 64] |= 1ULL << (i % 64);
}

static inline void bits_clear(uint64_t *b, uint64_t first, uint64_t n)
{
	for (uint64_t i = first; i < first + n; i++)
		b[i / 64] &= ~(1ULL << (i % 64));
}

/*
 * bits_run - the next run of bits equal to @set in [*at, end): *at moved to its first,
 * its end returned; *at == end (returned too) when there is none. Walk them with
 *   for (uint64_t p = 0, e; (e = bits_run(b, &p, n, true)) > p; p = e) ...
 */
static inline uint64_t bits_run(const uint64_t *b, uint64_t *at, uint64_t end, bool set)
{
	const uint64_t none = set ? 0 : ~0ULL; /* a word with no bit of the run */
	uint64_t p = *at, e;

	while (p < end && bits_test(b, p) != set) {
		if (p % 64 == 0 && b[p / 64] == none)
			p += 64;
		else
			p++;
	}
	if (p > end)
		p = end;
	for (e = p; e < end && bits_test(b, e) == set; e++)
		;
	*at = p;
	return e;
}

#endif
