/*
 * test_snapshot.c - the page-state machine and the page pool of the snapshot engine.
 */
#include "suites.h"
#include "../../snapshot/ptab.h"
#include "../../snapshot/pool.h"

#include <pthread.h>
#include <string.h>

#define RACE_PAGES 100000

static uint8_t race_state[RACE_PAGES];
static int race_wins[2];

struct racer {
	int who;
	enum page_state to;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	for (int p = 0; p < RACE_PAGES; p++)
		if (ps_take(&race_state[p], r->to))
			__atomic_fetch_add(&race_wins[r->who], 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Only a protected page can be taken, and only once: by the writer or by a fault. */
START_TEST(test_take_once)
{
	uint8_t st = PS_PROTECTED;

	ck_assert(ps_take(&st, PS_CLAIMED));
	ck_assert_int_eq(ps_get(&st), PS_CLAIMED);
	ck_assert(!ps_take(&st, PS_COPIED));
	ps_set(&st, PS_SAVED);
	ck_assert(!ps_take(&st, PS_CLAIMED));
	st = PS_ZERO;
	ck_assert(!ps_take(&st, PS_COPIED));
}
END_TEST

/* Writer and fault handler racing over every page: each page has exactly one winner. */
START_TEST(test_race_one_winner)
{
	struct racer w = { 0, PS_CLAIMED }, f = { 1, PS_COPIED };
	pthread_t a, b;

	memset(race_state, PS_PROTECTED, sizeof(race_state));
	race_wins[0] = race_wins[1] = 0;
	pthread_create(&a, NULL, race, &w);
	pthread_create(&b, NULL, race, &f);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	ck_assert_int_eq(race_wins[0] + race_wins[1], RACE_PAGES);
	for (int p = 0; p < RACE_PAGES; p++)
		ck_assert_msg(race_state[p] == PS_CLAIMED || race_state[p] == PS_COPIED,
			      "page %d in state %d", p, race_state[p]);
}
END_TEST

/* Nothing is handed out before it is faulted in; then pages (cut from slots) are
 * distinct and page-aligned until the ready memory is gone; they come back; the peak
 * is remembered. */
START_TEST(test_pool)
{
	const size_t slot = 4 * 4096;
	struct pool p;
	void *bufs[8];

	ck_assert_int_eq(pool_init(&p, 4 * slot, slot), 0);
	ck_assert_ptr_null(pool_get_page(&p));
	ck_assert_uint_eq(pool_resident_bytes(&p), 0);
	ck_assert_int_eq(pool_grow(&p, 2), 0);
	ck_assert_uint_eq(pool_ready_bytes(&p), 2 * slot);
	ck_assert_uint_ge(pool_resident_bytes(&p), 2 * slot);
	for (int i = 0; i < 8; i++) {
		bufs[i] = pool_get_page(&p);
		ck_assert_ptr_nonnull(bufs[i]);
		ck_assert_uint_eq((uintptr_t)bufs[i] % 4096, 0);
		for (int j = 0; j < i; j++)
			ck_assert_ptr_ne(bufs[i], bufs[j]);
	}
	ck_assert_ptr_null(pool_get_page(&p));
	ck_assert_uint_eq(pool_in_use(&p), 8 * 4096);
	for (int i = 0; i < 8; i++)
		pool_put(&p, bufs[i]);
	ck_assert_uint_eq(pool_in_use(&p), 0);
	ck_assert_uint_eq(pool_take_peak(&p), 8 * 4096);
	ck_assert_uint_eq(pool_take_peak(&p), 0);
	pool_fini(&p);
	ck_assert_int_ne(pool_init(&p, 100, 4096), 0);
	ck_assert_int_ne(pool_init(&p, 8192, 3000), 0);
}
END_TEST

/* An arena slot holds compressed copies: it counts in use but not as raw copies; raw
 * bytes moved into it stay counted (pool_count_packed) until they leave, and the slot
 * is free again once its last page is back. */
START_TEST(test_pool_arena)
{
	const size_t slot = 4 * 4096;
	struct pool p;
	uint8_t *copy, *arena;

	ck_assert_int_eq(pool_init(&p, 2 * slot, slot), 0);
	ck_assert_int_eq(pool_grow(&p, 2), 0);
	copy = pool_get_slot(&p, 0);
	ck_assert_uint_eq(pool_raw(&p), slot);
	arena = pool_get_arena(&p, 0);
	ck_assert_ptr_nonnull(arena);
	ck_assert_uint_eq(pool_in_use(&p), 2 * slot);
	ck_assert_uint_eq(pool_raw(&p), slot);
	pool_arena_back(&p, arena, 3);       /* the pack took one page */
	pool_unused(&p, copy, 4);            /* the four copies are in it */
	pool_count_packed(&p, 4);
	ck_assert_uint_eq(pool_in_use(&p), 4096);
	ck_assert_uint_eq(pool_raw(&p), slot);
	ck_assert_uint_eq(pool_free_slots(&p), 1);
	pool_arena_back(&p, arena + 4096, 1); /* the writer took the pack */
	pool_count_packed(&p, -4);
	ck_assert_uint_eq(pool_in_use(&p), 0);
	ck_assert_uint_eq(pool_raw(&p), 0);
	ck_assert_uint_eq(pool_free_slots(&p), 2);
	ck_assert_uint_eq(pool_take_raw_peak(&p), slot);
	ck_assert_uint_eq(pool_take_peak(&p), 2 * slot);
	/* A region slot whose three held copies became a one-page pack over them: an
	 * arena of which one page is taken, two given back (its fourth page never was). */
	copy = pool_get_slot(&p, 0);
	pool_unused(&p, copy, 1);
	ck_assert_ptr_null(pool_region_of(&p, copy + 4096, 2));
	ck_assert_ptr_eq(pool_region_of(&p, copy + 4096, 3), copy);
	pool_region_to_arena(&p, copy, 3);
	pool_count_packed(&p, 3);
	pool_arena_back(&p, copy, 2);
	ck_assert_uint_eq(pool_in_use(&p), 4096);
	ck_assert_uint_eq(pool_raw(&p), 3 * 4096);
	ck_assert_uint_eq(pool_free_slots(&p), 1);
	pool_arena_back(&p, copy, 1);
	pool_count_packed(&p, -3);
	ck_assert_uint_eq(pool_in_use(&p), 0);
	ck_assert_uint_eq(pool_raw(&p), 0);
	ck_assert_uint_eq(pool_free_slots(&p), 2);
	pool_fini(&p);
}
END_TEST

/* A region slot comes whole, only while more than the reserve is free; its pages go
 * back one by one (unused ones at once) and the slot is free again after the last.
 * Shrinking gives the memory back. */
START_TEST(test_pool_slots)
{
	const size_t slot = 4 * 4096;
	struct pool p;
	uint8_t *s1, *s2;

	ck_assert_int_eq(pool_init(&p, 4 * slot, slot), 0);
	ck_assert_int_eq(pool_grow(&p, 4), 0);
	s1 = pool_get_slot(&p, 1);
	s2 = pool_get_slot(&p, 1);
	ck_assert_ptr_nonnull(s1);
	ck_assert_ptr_nonnull(s2);
	ck_assert_uint_eq((uintptr_t)s1 % slot, 0);
	ck_assert_ptr_null(pool_get_slot(&p, 2)); /* two free, both reserved */
	ck_assert_uint_eq(pool_in_use(&p), 2 * slot);
	pool_unused(&p, s1, 1);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(pool_free_slots(&p), 2);
		pool_put(&p, s1 + i * 4096);
	}
	ck_assert_uint_eq(pool_free_slots(&p), 3);
	pool_unused(&p, s2, 4);
	ck_assert_uint_eq(pool_in_use(&p), 0);
	ck_assert_uint_eq(pool_free_slots(&p), 4);
	pool_shrink(&p, 1);
	ck_assert_uint_eq(pool_ready_bytes(&p), slot);
	ck_assert_uint_le(pool_resident_bytes(&p), slot);
	ck_assert_ptr_nonnull(pool_get_slot(&p, 0));
	ck_assert_ptr_null(pool_get_page(&p));
	pool_fini(&p);
}
END_TEST

Suite *snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("pagestate+pool");

	tcase_add_test(tc, test_take_once);
	tcase_add_test(tc, test_race_one_winner);
	tcase_add_test(tc, test_pool);
	tcase_add_test(tc, test_pool_slots);
	tcase_add_test(tc, test_pool_arena);
	suite_add_tcase(s, tc);
	return s;
}
