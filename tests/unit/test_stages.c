/*
 * test_stages.c - each stage of the snapshot engine alone, on plain memory: the page
 * tables, the plan, write tracking, the copy-on-write data path (its copies and its
 * sink), held-copy compression, the writer, the fork policy and the observation fed
 * back to the tracker. No VM and no other stage than the ones a stage is built on.
 */
#include "suites.h"
#include "../../snapshot/cow.h"
#include "../../snapshot/forkpol.h"
#include "../../snapshot/image.h"
#include "../../snapshot/memrestore.h"
#include "../../snapshot/observe.h"
#include "../../snapshot/plan.h"
#include "../../snapshot/ptab.h"
#include "../../snapshot/squeeze.h"
#include "../../snapshot/track.h"
#include "../../snapshot/writer.h"
#include "../../base/mono.h"
#include "../../base/pages.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <xxhash.h>

#define ST_MEM    (16ULL << 20)       /* 8 chunks */
#define ST_REGION (2ULL << 20)
#define ST_PAGES  (ST_MEM / PAGE_SIZE)
#define ST_PER    (HUGE_SIZE / PAGE_SIZE)
#define ST_WAIT_S 20                  /* a background thread's work, at most */

/* Memory for the stages: pages written in chunks 1, 2 (compressible) and 5. */
struct st {
	struct gmem mem;
	struct snap_ptab pt;
	struct snap_plan pl;
	struct snap_track tr;
	struct pool pool;
	char dir[64], file[96];
};

static struct st s;

static void st_fill_page(uint64_t p, uint8_t seed)
{
	uint8_t *at = s.mem.host + p * PAGE_SIZE;

	for (size_t i = 0; i < PAGE_SIZE; i += 64)
		at[i] = (uint8_t)(seed + i / 64); /* mostly zero: compresses well */
}

/* Whether page @p of the memory is resident, as mincore sees it (the host may back
 * a touched page's whole 2 MiB with a huge page). */
static bool st_present(uint64_t p)
{
	unsigned char v = 0;

	ck_assert_int_eq(mincore(s.mem.host + p * PAGE_SIZE, PAGE_SIZE, &v), 0);
	return v & 1;
}

static uint64_t st_present_pages(uint64_t first, uint64_t end)
{
	uint64_t n = 0;

	for (uint64_t p = first; p < end; p++)
		n += st_present(p);
	return n;
}

/* Pages written with data (the rest of a huge page reads as zero). */
#define ST_DATA_PAGES (2 * ST_PER + 1)

static void st_setup(void)
{
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(gmem_map(&s.mem, ST_MEM), 0);
	for (uint64_t p = 1 * ST_PER; p < 3 * ST_PER; p++)
		st_fill_page(p, (uint8_t)p);
	st_fill_page(5 * ST_PER + 7, 0xAB);
	ck_assert_int_eq(ptab_init(&s.pt, ST_MEM), 0);
	ck_assert_int_eq(plan_init(&s.pl, ST_MEM, ST_REGION), 0);
	track_init(&s.tr, &s.pt);
	ck_assert_int_eq(pool_init(&s.pool, 8 * ST_REGION, ST_REGION), 0);
	ck_assert_int_eq(pool_grow(&s.pool, 8), 0);
	strcpy(s.dir, "/tmp/ccvm-stages-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(s.dir));
	snprintf(s.file, sizeof(s.file), "%s/stage.img", s.dir);
}

static void st_teardown(void)
{
	unlink(s.file);
	rmdir(s.dir);
	pool_fini(&s.pool);
	plan_fini(&s.pl);
	ptab_fini(&s.pt);
	gmem_unmap(&s.mem);
}

/* Page tables: the pages with data are the ones to save, the rest are holes. */
START_TEST(test_ptab_marks_present_pages)
{
	ck_assert_int_eq(ptab_mark(&s.pt, s.mem.host), 0);
	for (uint64_t p = 0; p < ST_PAGES; p++) {
		bool data = (p >= ST_PER && p < 3 * ST_PER) || p == 5 * ST_PER + 7;

		ck_assert_msg(ps_get(&s.pt.state[p]) == (st_present(p) ? PS_PROTECTED : PS_ZERO),
			      "page %llu", (unsigned long long)p);
		ck_assert(!data || st_present(p));
	}
	/* Exactly one of two racers takes a page. */
	ck_assert(ps_take(&s.pt.state[ST_PER], PS_COPYING));
	ck_assert(!ps_take(&s.pt.state[ST_PER], PS_CLAIMED));
	s.pt.split[3] = 1;
	ptab_collapse_split(&s.pt, &s.mem);
	ck_assert_int_eq(s.pt.split[3], 0);
}
END_TEST

/* The plan: hot regions first under ccow, address order otherwise; region geometry. */
START_TEST(test_plan_order)
{
	static uint64_t written[ST_PAGES / 64];
	const uint64_t want[] = { 2, 5, 0, 1, 3, 4, 6, 7 }, per = ST_REGION / PAGE_SIZE;
	struct tracker tr;
	uint64_t first, end, r0, r1;

	ck_assert_int_eq(tracker_init(&tr, NULL, s.mem.host, ST_MEM, ST_REGION, 1000,
				      (struct tracker_progress){ 0 }, NULL), 0);
	plan_make(&s.pl, &tr, SNAP_CCOW, 0.5, SNAP_HOT_FIRST);
	ck_assert_uint_eq(s.pl.regions_hot, 0); /* nothing known yet: all cold */
	for (uint64_t i = 0; i < s.pl.chunks; i++)
		ck_assert_uint_eq(s.pl.order[i], i);
	/* A window in which regions 2 and 5 were written whole. */
	memset(written + 2 * per / 64, 0xff, per / 8);
	memset(written + 5 * per / 64, 0xff, per / 8);
	coverage_add_window(&tr.cov, written, NULL, 1.0);
	plan_make(&s.pl, &tr, SNAP_CCOW, 0.5, SNAP_HOT_FIRST);
	ck_assert_uint_eq(s.pl.regions_hot, 2);
	ck_assert(s.pl.hot[2] && s.pl.hot[5] && !s.pl.hot[0]);
	for (uint64_t i = 0; i < s.pl.chunks; i++)
		ck_assert_uint_eq(s.pl.order[i], want[i]);
	plan_make(&s.pl, &tr, SNAP_CCOW, 0.5, SNAP_LINEAR);
	ck_assert_uint_eq(s.pl.order[0], 0);
	plan_make(&s.pl, &tr, SNAP_COW, 0.5, SNAP_HOT_FIRST);
	ck_assert_uint_eq(s.pl.regions_hot, 0);
	for (uint64_t i = 0; i < s.pl.chunks; i++)
		ck_assert_uint_eq(s.pl.order[i], i);
	plan_make(&s.pl, NULL, SNAP_CCOW, 0, SNAP_HOT_FIRST); /* CCoW-All: every region */
	ck_assert_uint_eq(s.pl.regions_hot, s.pl.n_regions);
	plan_region_pages(&s.pl, s.pl.n_regions - 1, &first, &end);
	ck_assert_uint_eq(end, ST_PAGES);
	ck_assert_uint_eq(end - first, per);
	tracker_fini(&tr);
	/* Regions smaller than a chunk: a chunk spans several. */
	plan_fini(&s.pl);
	ck_assert_int_eq(plan_init(&s.pl, ST_MEM, 512 << 10), 0);
	plan_chunk_regions(&s.pl, 1, &r0, &r1);
	ck_assert_uint_eq(r0, 4);
	ck_assert_uint_eq(r1, 7);
}
END_TEST

/* Tracking: what an instant takes as written, faults counted, a failure undone. */
START_TEST(test_track_instant)
{
	uint64_t held, faults;

	ck_assert_int_eq(ptab_mark(&s.pt, s.mem.host), 0);
	track_instant(&s.tr, false, &held, &faults); /* the first instant: all present */
	ck_assert_uint_eq(held, ST_PAGES);
	ck_assert_int_eq(ptab_mark(&s.pt, s.mem.host), 0);
	track_unprotected(&s.tr, ST_PER, 2);          /* lifted without a fault */
	ps_set(&s.pt.state[ST_PER + 10], PS_SAVED);
	track_fault(&s.tr, ST_PER + 10);              /* a fault only tracking took */
	track_fault(&s.tr, ST_PER + 11);              /* a snapshot's own fault */
	track_instant(&s.tr, true, &held, &faults);
	ck_assert_uint_eq(held, 4);
	ck_assert_uint_eq(faults, 1);
	ck_assert_int_eq(ps_get(&s.pt.state[ST_PER + 5]), PS_PARENT);
	ck_assert_int_eq(ps_get(&s.pt.state[ST_PER + 11]), PS_PROTECTED);
	ck_assert_int_eq(ps_get(&s.pt.state[0]), PS_PARENT); /* a hole at both instants */
	ck_assert_int_eq(s.pt.dirty[ST_PER], 0);
	track_failed(&s.tr);                          /* they are written still */
	ck_assert_int_eq(s.pt.dirty[ST_PER], 1);
	ck_assert_int_eq(s.pt.dirty[ST_PER + 11], 1);
	ck_assert_int_eq(ps_get(&s.pt.state[ST_PER + 11]), PS_SAVED);
}
END_TEST

/* A sink that keeps what a fault saved itself. */
struct st_sink {
	uint64_t saved, failed, last;
	uint8_t bytes[PAGE_SIZE];
};

static int st_save(void *ctx, uint64_t p, const uint8_t *data)
{
	struct st_sink *k = ctx;

	k->saved++;
	k->last = p;
	memcpy(k->bytes, data, PAGE_SIZE);
	return 0;
}

static void st_fail(void *ctx, int rc, const char *what)
{
	(void)rc;
	(void)what;
	((struct st_sink *)ctx)->failed++;
}

static void st_cow(struct snap_cow *c, struct st_sink *k, struct snap_tuning *tune)
{
	*tune = (struct snap_tuning){ .fault_threads = 1 };
	ck_assert_int_eq(cow_init(c, s.mem.host, ST_MEM, &s.pt, &s.pl, &s.tr, &s.pool, tune,
				  &(struct cow_sink){ .save = st_save, .fail = st_fail, .ctx = k }),
			 0);
	ck_assert_int_eq(ptab_mark(&s.pt, s.mem.host), 0);
}

/* Write protection for a test of the pause's copies (false, after saying why, where
 * userfaultfd is unavailable: run the unit tests as root, as CI does). */
static bool st_protect(struct snap_cow *c)
{
	if (uffd_open(&c->wp, s.mem.host, ST_MEM, UFFD_MODE_WP)) {
		fprintf(stderr, "test_stages: no userfaultfd write protection: skipped\n");
		cow_fini(c);
		return false;
	}
	return true;
}

static void st_unprotect(struct snap_cow *c)
{
	uffd_protect(&c->wp, 0, ST_MEM, false);
	uffd_close(&c->wp);
	c->wp.fd = -1;
}

/* cow: a page is copied before it changes; without a buffer the sink saves it. */
START_TEST(test_cow_copies_before_writes)
{
	uint64_t p = ST_PER + 3;
	uint8_t before[PAGE_SIZE];
	struct st_sink k = { 0 };
	struct snap_tuning tune;
	struct snap_cow c;

	st_cow(&c, &k, &tune);
	plan_make(&s.pl, NULL, SNAP_COW, 0.8, SNAP_LINEAR);
	cow_pool_plan(&c, false);
	memcpy(before, s.mem.host + p * PAGE_SIZE, PAGE_SIZE);
	cow_page(&c, p, false);
	s.mem.host[p * PAGE_SIZE] ^= 0xff; /* the write the copy was for */
	ck_assert_int_eq(ps_get(&s.pt.state[p]), PS_COPIED);
	ck_assert_int_eq(memcmp(s.pt.copy[p], before, PAGE_SIZE), 0);
	ck_assert_int_eq(s.pt.faulted[p], 1);
	ck_assert_uint_eq(c.n.pages_copied, 1);
	cow_page(&c, p, false); /* taken already: nothing more */
	ck_assert_uint_eq(c.n.pages_copied, 1);
	cow_reclaim(&c);
	ck_assert_uint_eq(pool_in_use(&s.pool), 0);
	ck_assert_int_eq(ps_get(&s.pt.state[p]), PS_SAVED);
	/* No buffer ready: the page goes to the sink, saved while the writer waits. */
	pool_shrink(&s.pool, 0);
	memcpy(before, s.mem.host + (p + 1) * PAGE_SIZE, PAGE_SIZE);
	cow_page(&c, p + 1, false);
	ck_assert_uint_eq(k.saved, 1);
	ck_assert_uint_eq(k.last, p + 1);
	ck_assert_int_eq(memcmp(k.bytes, before, PAGE_SIZE), 0);
	ck_assert_int_eq(ps_get(&s.pt.state[p + 1]), PS_SAVED);
	cow_fini(&c);
}
END_TEST

/* ccow eager pre-copy: hot regions copied whole in the pause, never protected. */
START_TEST(test_cow_eager_regions)
{
	struct st_sink k = { 0 };
	struct snap_tuning tune;
	struct snap_cow c;

	st_cow(&c, &k, &tune);
	if (!st_protect(&c))
		return;
	plan_make(&s.pl, NULL, SNAP_CCOW, 0, SNAP_HOT_FIRST); /* every region hot */
	cow_pool_prepare(&c, s.pl.regions_hot, 0); /* before the pause: no first touch in it */
	cow_pool_plan(&c, true);
	ck_assert_int_eq(cow_protect(&c), 0);
	cow_precopy_eager(&c, mono_ns(), 10ULL * 1000000000ULL);
	for (uint64_t r = 0; r < s.pl.n_regions; r++) {
		bool data = r == 1 || r == 2 || r == 5;

		ck_assert_int_eq(s.pl.eager[r], 1); /* (an empty region needs no protection) */
		if (data)
			ck_assert_int_eq(ps_get(&s.pt.state[r * ST_PER + 7]), PS_COPIED);
	}
	ck_assert_uint_eq(c.n.regions_eager, s.pl.n_regions);
	ck_assert_uint_eq(c.n.regions_precopied, 3);
	ck_assert_uint_eq(c.n.pages_precopied, st_present_pages(0, ST_PAGES));
	ck_assert_int_eq(s.pt.pre[ST_PER], 1);
	ck_assert_int_eq(s.pt.dirty[ST_PER], 1); /* lifted without a fault: tracked */
	ck_assert_int_eq(memcmp(s.pt.copy[5 * ST_PER + 7], s.mem.host + (5 * ST_PER + 7) *
				PAGE_SIZE, PAGE_SIZE), 0);
	cow_reclaim(&c);
	ck_assert_uint_eq(pool_in_use(&s.pool), 0);
	st_unprotect(&c);
	cow_fini(&c);
}
END_TEST

/* ccow eager pre-copy of pages: the hot pages present at the instant copied in the
 * pause, hottest first, into memory faulted in before it; absent ones skipped; with a
 * budget that covers it, every other present page too; nothing copied is protected
 * afterwards, and what is left is, in runs between the copies. */
START_TEST(test_cow_eager_pages)
{
	const uint32_t hot[] = { 5 * ST_PER + 7, ST_PER + 9, 4 * ST_PER /* absent */, ST_PER + 8 };
	struct st_sink k = { 0 };
	struct snap_tuning tune;
	struct snap_cow c;

	st_cow(&c, &k, &tune);
	if (!st_protect(&c))
		return;
	plan_make(&s.pl, NULL, SNAP_CCOW, 0.8, SNAP_HOT_FIRST); /* no region hot */
	memcpy(s.pl.hot_pages, hot, sizeof(hot));
	s.pl.n_hot_pages = 4;
	ck_assert_int_eq(pool_grow(&s.pool, 4), 0); /* 2048 pages: more than present */
	cow_pool_plan(&c, true);
	ck_assert_int_eq(cow_protect(&c), 0);
	cow_precopy_eager(&c, mono_ns(), 0); /* no budget: nothing */
	ck_assert_uint_eq(c.n.pages_eager, 0);
	cow_precopy_eager(&c, mono_ns(), 10ULL * 1000000000ULL);
	ck_assert_uint_eq(c.n.regions_eager, 0);
	ck_assert_uint_eq(c.n.pages_eager, st_present_pages(0, ST_PAGES)); /* hot ones, then all */
	for (int i = 0; i < 4; i++) {
		uint64_t p = hot[i];

		ck_assert_int_eq(ps_get(&s.pt.state[p]), st_present(p) ? PS_COPIED : PS_ZERO);
		if (!st_present(p))
			continue;
		ck_assert_int_eq(s.pt.pre[p], 1);
		ck_assert_int_eq(s.pt.dirty[p], 1); /* never protected: tracked as written */
		ck_assert_int_eq(s.pt.split[p / ST_PER], 1); /* its huge page put back later */
		ck_assert_int_eq(memcmp(s.pt.copy[p], s.mem.host + p * PAGE_SIZE, PAGE_SIZE), 0);
	}
	/* Copied pages were unprotected, so this write does not trap (it would hang the
	 * test: no fault thread serves this userfaultfd). */
	s.mem.host[hot[0] * PAGE_SIZE] ^= 1;
	cow_reclaim(&c);
	ck_assert_uint_eq(pool_in_use(&s.pool), 0);
	st_unprotect(&c);
	cow_fini(&c);
}
END_TEST

/* A chunk's copies of region @r as copy-on-write would leave them: one slot each. */
static void st_copy_region(uint64_t r)
{
	uint8_t *slot = pool_get_slot(&s.pool, 0);
	size_t unused = 0;

	ck_assert_ptr_nonnull(slot);
	for (uint64_t i = 0; i < ST_PER; i++) {
		uint64_t p = r * ST_PER + i;

		if (ps_get(&s.pt.state[p]) != PS_PROTECTED) {
			unused++;
			continue;
		}
		memcpy(slot + i * PAGE_SIZE, s.mem.host + p * PAGE_SIZE, PAGE_SIZE);
		ck_assert(ps_take(&s.pt.state[p], PS_COPYING));
		s.pt.copy[p] = slot + i * PAGE_SIZE;
		ps_set(&s.pt.state[p], PS_COPIED);
	}
	pool_unused(&s.pool, slot, unused);
}

static struct wq_chunk *st_chunk(void)
{
	struct wq_chunk *ch = calloc(1, sizeof(*ch));

	ck_assert_ptr_nonnull(ch);
	ch->buf = mmap(NULL, IMG_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(ch->buf, MAP_FAILED);
	return ch;
}

/* squeeze: copies compressed under pressure, and given back exactly to the writer. */
START_TEST(test_squeeze_packs_and_unpacks)
{
	uint64_t write_at = 0, zero = 0, deadline;
	uint8_t *want = malloc(IMG_CHUNK);
	struct wq_chunk *ch = st_chunk();
	struct snap_squeeze q;
	uint64_t c = 2;

	ck_assert_ptr_nonnull(want);
	memcpy(want, s.mem.host + c * IMG_CHUNK, IMG_CHUNK);
	ck_assert_int_eq(ptab_mark(&s.pt, s.mem.host), 0);
	plan_make(&s.pl, NULL, SNAP_CCOW, 0.8, SNAP_LINEAR);
	pool_reset(&s.pool);
	st_copy_region(1);
	st_copy_region(2);
	for (int i = 0; i < 3; i++) /* more than half the pool in use: pressure */
		ck_assert_ptr_nonnull(pool_get_slot(&s.pool, 0));
	ck_assert_int_eq(squeeze_init(&q, &s.pt, &s.pool, &s.pl, ST_MEM), 0);
	squeeze_plan(&q, &(struct squeeze_job){ .codec = IMG_CODEC_NONE, .write_at = &write_at });
	ck_assert_int_eq(squeeze_thread_start(&q, 0, false), 0);
	squeeze_begin(&q);
	deadline = mono_ns() + ST_WAIT_S * 1000000000ULL;
	while (ps_get(&s.pt.state[c * ST_PER]) != PS_PACKED && mono_ns() < deadline)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	squeeze_end(&q);
	ck_assert_int_eq(ps_get(&s.pt.state[c * ST_PER]), PS_PACKED);
	ck_assert_uint_gt(q.compressed_bytes, 0);
	/* The writer takes the chunk: its bytes, exactly as they were copied. */
	squeeze_claim(&q, c);
	memset(ch->buf, 0, IMG_CHUNK);
	ck_assert_int_eq(squeeze_unpack(&q, c, ch, &zero), 0);
	ck_assert_int_eq(memcmp(ch->buf, want, IMG_CHUNK), 0);
	ck_assert_int_eq(ps_get(&s.pt.state[c * ST_PER]), PS_SAVED);
	squeeze_reclaim(&q);
	squeeze_fini(&q);
	munmap(ch->buf, IMG_CHUNK);
	free(ch);
	free(want);
}
END_TEST

/* The image at s.file read back into fresh memory equals @want (ST_MEM bytes). */
static void st_image_equals(const uint8_t *want)
{
	char err[IMG_ERR_LEN];
	struct img_reader r;
	struct gmem fresh;

	ck_assert_int_eq(gmem_map(&fresh, ST_MEM), 0);
	ck_assert_msg(img_open(s.file, &r, err) == 0, "%s", err);
	ck_assert_int_eq(memrestore_eager(s.file, &r, &fresh), 0);
	img_close(&r);
	ck_assert_int_eq(memcmp(fresh.host, want, ST_MEM), 0);
	gmem_unmap(&fresh);
}

static struct img_writer *st_image(void)
{
	struct img_header_info info = { .ram_size = ST_MEM, .codec = IMG_CODEC_ZSTD, .level = 1 };
	struct img_writer *img;

	ck_assert_int_eq(img_create(s.file, &info, &img), 0);
	return img;
}

/* The writer, paused (stop) and in the background (cow): the image is memory. */
START_TEST(test_writer_saves_memory)
{
	struct uffd none = { .fd = -1 };
	struct snap_squeeze q;
	struct snap_writer w;
	bool stopping = false;
	uint8_t *want = malloc(ST_MEM);

	ck_assert_ptr_nonnull(want);
	memcpy(want, s.mem.host, ST_MEM);
	ck_assert_int_eq(squeeze_init(&q, &s.pt, &s.pool, &s.pl, ST_MEM), 0);
	ck_assert_int_eq(writer_init(&w, s.mem.host, ST_MEM, &s.pt, &s.pl, &q, &none, NULL,
				     &stopping), 0);
	for (int background = 0; background < 2; background++) {
		ck_assert_int_eq(ptab_mark(&s.pt, s.mem.host), 0);
		plan_make(&s.pl, NULL, SNAP_COW, 0.8, SNAP_LINEAR);
		squeeze_plan(&q, &(struct squeeze_job){ .write_at = &w.write_at });
		writer_plan(&w, &(struct writer_job){ .img = st_image(), .threads = 2,
						      .t_start_ns = mono_ns(),
						      .keep_protected = true });
		ck_assert_int_eq(background ? writer_run(&w) : writer_run_paused(&w), 0);
		ck_assert_int_eq(img_finish(w.job.img), 0);
		/* stop counts the pages of data; cow every present page it took */
		ck_assert_uint_eq(w.pages_saved, background ? st_present_pages(0, ST_PAGES) :
							     ST_DATA_PAGES);
		st_image_equals(want);
		unlink(s.file);
	}
	writer_fini(&w);
	squeeze_fini(&q);
	free(want);
}
END_TEST

struct st_done {
	pthread_mutex_t lock;
	int rc, calls;
};

static void st_fork_done(void *ctx, int rc, const char *what)
{
	struct st_done *d = ctx;

	(void)what;
	pthread_mutex_lock(&d->lock);
	d->rc = rc;
	d->calls++;
	pthread_mutex_unlock(&d->lock);
}

/* fork: the child writes memory as it was at the fork, whatever the parent does. */
START_TEST(test_fork_writes_the_instant)
{
	struct st_done d = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct uffd none = { .fd = -1 };
	struct snap_squeeze q;
	struct snap_writer w;
	struct snap_fork f;
	bool stopping = false;
	uint8_t *want = malloc(ST_MEM);
	pthread_t waiter;

	ck_assert_ptr_nonnull(want);
	memcpy(want, s.mem.host, ST_MEM);
	ck_assert_int_eq(ptab_mark(&s.pt, s.mem.host), 0);
	ck_assert_int_eq(squeeze_init(&q, &s.pt, &s.pool, &s.pl, ST_MEM), 0);
	ck_assert_int_eq(writer_init(&w, s.mem.host, ST_MEM, &s.pt, &s.pl, &q, &none, NULL,
				     &stopping), 0);
	writer_plan(&w, &(struct writer_job){ .img = st_image(), .threads = 1 });
	forkpol_init(&f, &w, &stopping, st_fork_done, &d);
	forkpol_before(&f);
	ck_assert_int_eq(forkpol_start(&f), 0);
	memset(s.mem.host + IMG_CHUNK, 0x5A, IMG_CHUNK); /* after the instant */
	ck_assert_int_eq(pthread_create(&waiter, NULL, forkpol_waiter, &f), 0);
	pthread_join(waiter, NULL);
	ck_assert_int_eq(d.calls, 1);
	ck_assert_int_eq(d.rc, 0);
	ck_assert_uint_eq(f.pages_saved, st_present_pages(0, ST_PAGES));
	img_forget(w.job.img);
	st_image_equals(want);
	writer_fini(&w);
	squeeze_fini(&q);
	free(want);
}
END_TEST

/* What the snapshot saw: region copies written since, pages the guest faulted. */
START_TEST(test_observe_regions)
{
	struct snap_observe o;
	uint64_t unwritten;

	ck_assert_int_eq(ptab_mark(&s.pt, s.mem.host), 0);
	ck_assert_int_eq(observe_init(&o, s.pl.n_regions, s.pt.pages), 0);
	for (uint64_t p = ST_PER; p < 2 * ST_PER; p++) { /* region 1 copied whole */
		s.pt.pre[p] = 1;
		s.pt.pre_hash[p] = XXH3_64bits(s.mem.host + p * PAGE_SIZE, PAGE_SIZE);
	}
	s.mem.host[(ST_PER + 4) * PAGE_SIZE] ^= 1;     /* then written */
	s.pt.faulted[2 * ST_PER + 9] = 1;               /* a fault in region 2 */
	o.progress_start = 100;
	s.pt.chunk_saved_at[2] = 150;
	unwritten = observe_snapshot(&o, &s.pt, &s.pl, s.mem.host, 200, NULL, false);
	ck_assert_uint_eq(unwritten, ST_PER - 1);
	ck_assert_uint_eq(o.obs[1].written, 1);
	ck_assert_uint_eq(o.obs[1].pages, ST_PER);
	ck_assert(o.obs[1].exposure == 100.0 * ST_PER);
	ck_assert_uint_eq(o.obs[2].written, 1);
	ck_assert(o.obs[2].exposure == 50.0 * ST_PER);
	ck_assert_uint_eq(o.obs[0].pages, 0);
	ck_assert_int_eq(s.pt.pre[ST_PER], 0);
	observe_fini(&o);
}
END_TEST

Suite *stages_suite(void)
{
	Suite *su = suite_create("stages");
	TCase *tc = tcase_create("each stage alone");

	tcase_add_checked_fixture(tc, st_setup, st_teardown);
	tcase_set_timeout(tc, 2 * ST_WAIT_S);
	tcase_add_test(tc, test_ptab_marks_present_pages);
	tcase_add_test(tc, test_plan_order);
	tcase_add_test(tc, test_track_instant);
	tcase_add_test(tc, test_cow_copies_before_writes);
	tcase_add_test(tc, test_cow_eager_regions);
	tcase_add_test(tc, test_cow_eager_pages);
	tcase_add_test(tc, test_squeeze_packs_and_unpacks);
	tcase_add_test(tc, test_writer_saves_memory);
	tcase_add_test(tc, test_fork_writes_the_instant);
	tcase_add_test(tc, test_observe_regions);
	suite_add_tcase(su, tc);
	return su;
}
