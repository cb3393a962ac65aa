/*
 * squeeze.c - held copies compressed under pressure (zcache's idea applied to the
 * copies a copy-on-write snapshot holds).
 *
 * A copy waits in the pool until the writer saves its chunk; on a busy guest the
 * writer, bound by the disk, falls behind the faults and the copies pile up (ccow's
 * peak memory was 1.7-1.9x cow's). When they fill more than half of the pool, this
 * thread compresses the held copies of the chunks the writer will reach last into
 * arena slots of the same pool and gives their buffers back, so that a pool of about
 * the compressed size serves the snapshot: a region copy that finds no slot falls back
 * to a trap per page, which is what a smaller pool costs without this.
 *
 * Who touches a chunk's copies is decided per chunk (sq_state): the squeezer packs
 * only a chunk it claimed from SQ_OPEN, and the writer claims each chunk for good
 * before it stages it, waiting while the squeezer is on it (one pack: a few ms). A
 * packed page is PS_PACKED; the fault path never touches a page that is not
 * PS_PROTECTED, so packing races with nothing else.
 *
 * A chunk whose every present page is a copy (a hot region copied whole) is compressed
 * as the image will store it: the whole chunk, holes as zeros, with the image's codec
 * and level, its checksum and zero pages taken from the bytes at hand. The writer
 * hands that frame to the image as it is: the chunk is compressed once, never
 * decompressed, and this thread runs at the writer's priority, since it does the
 * writer's work early. Any other chunk is packed span by span (a chunk, or a pool
 * slot if that is smaller): its copies in page order as one frame, decompressed when
 * written. A pack is kept only if it saves pages. Packs are monitor memory, compressed
 * and decompressed by this process alone.
 */
#include "squeeze.h"
#include "codec.h"
#include "../base/pages.h"
#include "../base/role.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

/* Packs use the image's codec; for an image stored raw, zstd level 1: Redis' memory
 * to ~0.49 of its size at ~0.5 GB/s a core (docs/evaluation.md, "Snapshot storage"). */
#define SQ_CODEC IMG_CODEC_ZSTD
#define SQ_LEVEL 1
#define SQ_MIN_PAGES 32          /* a span with fewer copies is not worth a frame */
#define SQ_AHEAD 2               /* chunks next to the writer are left alone */
#define SQ_NAP_NS 1000000L       /* between looks at the pool */
#define SQ_WAIT_NS 20000L        /* the writer, while the squeezer is on its chunk */

enum sq_state {
	SQ_OPEN = 0,    /* nobody on it */
	SQ_BUSY,        /* the squeezer is packing it */
	SQ_PACKED,      /* some of its copies are packed */
	SQ_RAW,         /* tried: its copies do not compress (not tried again) */
	SQ_WRITTEN,     /* the writer took it */
};

struct sq_pack {
	uint8_t *at;            /* in an arena slot; NULL: no pack */
	uint32_t len;           /* compressed bytes */
	uint16_t stored_pages;  /* pool pages it takes */
	uint16_t raw_pages;     /* copies it holds */
	bool whole;             /* the whole chunk, as the image stores it */
};

/* A chunk packed whole: what img_chunk_prepare would take from its bytes. */
struct sq_digest {
	uint64_t hash;
	uint8_t hole[IMG_CHUNK / PAGE_SIZE / 8]; /* per page: a hole (absent or all zero) */
};

static uint64_t sq_span_pages(const struct snap_squeeze *q)
{
	return q->span / PAGE_SIZE;
}

int squeeze_init(struct snap_squeeze *q, struct snap_ptab *pt, struct pool *pool,
		 const struct snap_plan *pl, uint64_t size)
{
	memset(q, 0, sizeof(*q));
	*q = (struct snap_squeeze){ .pt = pt, .pool = pool, .pl = pl, .size = size };
	worker_init(&q->w);
	q->span = q->pool->slot_size < IMG_CHUNK ? q->pool->slot_size : IMG_CHUNK;
	q->state = calloc(q->size / IMG_CHUNK ? q->size / IMG_CHUNK : 1, 1);
	q->packs = calloc(q->size / q->span ? q->size / q->span : 1, sizeof(struct sq_pack));
	q->digests = calloc(q->size / IMG_CHUNK ? q->size / IMG_CHUNK : 1, sizeof(struct sq_digest));
	return q->state && q->packs && q->digests ? 0 : -ENOMEM;
}

void squeeze_fini(struct snap_squeeze *q)
{
	squeeze_thread_stop(q);
	worker_destroy(&q->w);
	free(q->state);
	free(q->packs);
	free(q->digests);
	q->state = NULL;
	q->packs = NULL;
	q->digests = NULL;
}

void squeeze_plan(struct snap_squeeze *q, const struct squeeze_job *job)
{
	memset(q->state, SQ_OPEN, q->size / IMG_CHUNK);
	q->codec = job->codec;
	q->level = job->level;
	q->incremental = job->incremental;
	q->img = job->img;
	q->write_at = job->write_at;
	q->compressed_bytes = 0;
}

/* Held copies are packed with the image's codec, so that a whole chunk's pack can be
 * its frame; with none or auto (a codec per chunk, chosen as it is written) with
 * SQ_CODEC. */
static bool sq_image_codec(const struct snap_squeeze *q)
{
	return q->codec != IMG_CODEC_NONE && q->codec != IMG_CODEC_AUTO;
}

static enum img_codec sq_codec(const struct snap_squeeze *q)
{
	return sq_image_codec(q) ? q->codec : SQ_CODEC;
}

static int sq_level(const struct snap_squeeze *q)
{
	return sq_image_codec(q) ? q->level : SQ_LEVEL;
}

static bool sq_wanted(struct snap_squeeze *q)
{
	return worker_wanted(&q->w);
}

/* More than the share of the pool that starts packing is in use. */
static bool sq_pressure(struct snap_squeeze *q)
{
	return pool_in_use(q->pool) > pool_limit(q->pool) * q->pool->slot_size / SQ_PRESSURE_DIV;
}

/*
 * Packs go one after another into the open arena slot, so that the slots of the copies
 * they were made of come free whole (a slot is handed out again only once all its
 * pages are back). When the open arena is full, the next pack of a region copied whole
 * is written over its own copies and that slot becomes the arena: a free slot would
 * have to be won against the copier and the faults, which take any at once.
 */
static size_t sq_per_slot(const struct snap_squeeze *q)
{
	return q->pool->slot_size / PAGE_SIZE;
}

/* The rest of the open arena goes back (the packs in it go back as they are written). */
static void sq_arena_close(struct snap_squeeze *q)
{
	if (q->arena)
		pool_arena_back(q->pool, q->arena, sq_per_slot(q) - q->arena_used);
	q->arena = NULL;
	q->arena_used = 0;
}

/* @pages of the open arena, or NULL when it has not that many left. */
static uint8_t *sq_arena_room(struct snap_squeeze *q, size_t pages)
{
	uint8_t *at;

	if (!q->arena || q->arena_used + pages > sq_per_slot(q))
		return NULL;
	at = q->arena + q->arena_used * PAGE_SIZE;
	q->arena_used += pages;
	return at;
}

/* Slot @slot, now an arena with @pages of it taken, is the open one. */
static void sq_arena_open(struct snap_squeeze *q, uint8_t *slot, size_t pages)
{
	sq_arena_close(q);
	q->arena = slot;
	q->arena_used = pages;
}

/* A new arena from a free slot (or one faulted in, when the pool may grow), its first
 * @pages taken; NULL when the pool has none. */
static uint8_t *sq_arena_new(struct snap_squeeze *q, size_t pages)
{
	uint8_t *slot = pool_get_arena(q->pool, 0);

	if (!slot && pool_free_slots(q->pool) == 0 &&
	    pool_grow(q->pool, pool_ready_bytes(q->pool) / q->pool->slot_size + 1) == 0)
		slot = pool_get_arena(q->pool, 0); /* first touches: our time */
	if (slot)
		sq_arena_open(q, slot, pages);
	return slot;
}

/* @n more copies are held compressed. */
static void sq_count(struct snap_squeeze *q, uint64_t n)
{
	pool_count_packed(q->pool, (long)n);
	__atomic_fetch_add(&q->compressed_bytes, n * PAGE_SIZE, __ATOMIC_RELAXED);
}

/* Copies of span @s, gathered in page order into @buf, their pages in @pages; how
 * many. */
static uint64_t sq_gather(struct snap_squeeze *q, uint64_t s, uint8_t *buf, uint64_t *pages)
{
	uint64_t per = sq_span_pages(q), n = 0;

	for (uint64_t p = s * per; p < (s + 1) * per; p++)
		if (ps_get(&q->pt->state[p]) == PS_COPIED) {
			memcpy(buf + n * PAGE_SIZE, q->pt->copy[p], PAGE_SIZE);
			pages[n++] = p;
		}
	return n;
}

/* The @n copies gathered (@pages) are now the pack: PS_PACKED, their buffers back to
 * the pool. Only those: a fault may have copied another page of the span meanwhile.
 * Nothing else changes a COPIED page's state (the writer stays off the chunk, faults
 * take only PROTECTED ones). */
static void sq_commit(struct snap_squeeze *q, const uint64_t *pages, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		void *copy = q->pt->copy[pages[i]];

		q->pt->copy[pages[i]] = NULL;
		ps_set(&q->pt->state[pages[i]], PS_PACKED);
		pool_put(q->pool, copy);
	}
	sq_count(q, n);
}

/* The @n copies (@pages) are all of region slot @slot's held pages: a region copied
 * whole, the usual case under pressure. */
static bool sq_in_slot(struct snap_squeeze *q, const uint8_t *slot, const uint64_t *pages,
		       uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if ((const uint8_t *)q->pt->copy[pages[i]] < slot ||
		    (const uint8_t *)q->pt->copy[pages[i]] >= slot + q->pool->slot_size)
			return false;
	return true;
}

/* As sq_commit, the pack written over the copies it was made of, at the start of
 * their slot, which becomes the open arena. */
static void sq_commit_in_place(struct snap_squeeze *q, uint8_t *slot, const uint8_t *pack,
			       size_t len, uint64_t stored, const uint64_t *pages, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		q->pt->copy[pages[i]] = NULL;
		ps_set(&q->pt->state[pages[i]], PS_PACKED);
	}
	memcpy(slot, pack, len);
	pool_region_to_arena(q->pool, slot, sq_per_slot(q));
	sq_arena_open(q, slot, stored);
	sq_count(q, n);
}

/* The pack of the @n copies (@pages), @len bytes in @stored pages, into the open
 * arena, over the copies themselves, or into a new arena, and committed; where it
 * went, or NULL when the pool has no room for it. */
static uint8_t *sq_place(struct snap_squeeze *q, const uint8_t *pack, size_t len, uint64_t stored,
			 const uint64_t *pages, uint64_t n)
{
	uint8_t *at = sq_arena_room(q, stored), *slot;

	if (!at) {
		slot = pool_region_of(q->pool, q->pt->copy[pages[0]], n);
		if (slot && sq_in_slot(q, slot, pages, n)) {
			sq_commit_in_place(q, slot, pack, len, stored, pages, n);
			return slot;
		}
		at = sq_arena_new(q, stored);
	}
	if (at) {
		memcpy(at, pack, len);
		sq_commit(q, pages, n);
	}
	return at;
}

/* Chunk @c as the image stores it, holes as zeros, into @buf; its copies in @pages.
 * How many. */
static uint64_t sq_gather_whole(struct snap_squeeze *q, uint64_t c, uint8_t *buf, uint64_t *pages)
{
	uint64_t per = IMG_CHUNK / PAGE_SIZE, n = 0;

	for (uint64_t i = 0, p = c * per; i < per; i++, p++)
		if (ps_get(&q->pt->state[p]) == PS_COPIED) {
			memcpy(buf + i * PAGE_SIZE, q->pt->copy[p], PAGE_SIZE);
			pages[n++] = p;
		} else {
			memset(buf + i * PAGE_SIZE, 0, PAGE_SIZE);
		}
	return n;
}

/* Compress the @n pages' worth in @buf (@len bytes) and keep it as span @s's pack if it
 * saves a page. 1: packed; 0: not worth it; -ENOSPC: no arena room; -ENOMEM. */
static int sq_keep(struct snap_squeeze *q, uint64_t s, const uint8_t *buf, size_t len,
		   const uint64_t *pages, uint64_t n, bool whole)
{
	size_t cap = (size_t)(n - 1) * PAGE_SIZE; /* a page saved at least */
	uint8_t *out = codec_thread_buffer(CODEC_BUF_FRAME, codec_bound(IMG_CHUNK)), *at;
	uint64_t stored;
	ssize_t z;

	if (!out)
		return -ENOMEM;
	z = codec_compress(sq_codec(q), sq_level(q), buf, len, out, cap);
	if (z <= 0)
		return z == -ENOMEM ? -ENOMEM : 0;
	stored = ((uint64_t)z + PAGE_SIZE - 1) / PAGE_SIZE;
	at = sq_place(q, out, (size_t)z, stored, pages, n);
	if (!at)
		return -ENOSPC;
	q->packs[s] = (struct sq_pack){ .at = at, .len = (uint32_t)z,
					.stored_pages = (uint16_t)stored, .raw_pages = (uint16_t)n,
					.whole = whole };
	return 1;
}

/* Pack span @s. 1: packed; 0: not worth it; -ENOSPC: no arena room; -ENOMEM. */
static int sq_pack_span(struct snap_squeeze *q, uint64_t s)
{
	uint8_t *buf = codec_thread_buffer(CODEC_BUF_PACKED, q->span);
	uint64_t pages[IMG_CHUNK / PAGE_SIZE], n;

	if (!buf)
		return -ENOMEM;
	n = sq_gather(q, s, buf, pages);
	return n < SQ_MIN_PAGES ? 0 : sq_keep(q, s, buf, n * PAGE_SIZE, pages, n, false);
}

/* Every present page of chunk @c is a copy (nothing protected is left to be copied
 * later), and the image can take the chunk as one frame of its codec. */
static bool sq_whole(struct snap_squeeze *q, uint64_t c)
{
	uint64_t per = IMG_CHUNK / PAGE_SIZE;

	if (q->span != IMG_CHUNK || !sq_image_codec(q) || q->incremental)
		return false;
	for (uint64_t p = c * per; p < (c + 1) * per; p++) {
		enum page_state st = ps_get(&q->pt->state[p]);

		if (st != PS_COPIED && st != PS_ZERO)
			return false;
	}
	return true;
}

/* What the writer will need of whole chunk @c in @buf, whose copies are @pages: its
 * digest and, for the coverage tracker, the hashes of pages copied with a region. */
static void sq_digest(struct snap_squeeze *q, uint64_t c, const uint8_t *buf,
		      const uint64_t *pages, uint64_t n)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;
	struct sq_digest *d = &q->digests[c];
	uint8_t what[IMG_CHUNK / PAGE_SIZE];

	memset(what, IMG_PAGE_HOLE, sizeof(what));
	for (uint64_t i = 0; i < n; i++)
		what[pages[i] - c * per] = IMG_PAGE_DATA;
	d->hash = img_chunk_digest(c, buf, what);
	memset(d->hole, 0, sizeof(d->hole));
	for (uint64_t i = 0; i < per; i++)
		if (what[i] == IMG_PAGE_HOLE)
			d->hole[i / 8] |= (uint8_t)(1u << (i % 8));
	for (uint64_t i = 0; i < n; i++)
		if (q->pt->pre[pages[i]]) /* read only at the end (observe.c) */
			q->pt->pre_hash[pages[i]] = XXH3_64bits(buf + (pages[i] - c * per) * PAGE_SIZE,
							    PAGE_SIZE);
}

/* Pack chunk @c whole. 1, 0, -ENOSPC or -ENOMEM, as sq_keep. */
static int sq_pack_whole(struct snap_squeeze *q, uint64_t c)
{
	uint8_t *buf = codec_thread_buffer(CODEC_BUF_PACKED, IMG_CHUNK);
	uint64_t pages[IMG_CHUNK / PAGE_SIZE], n;
	int rc;

	if (!buf)
		return -ENOMEM;
	n = sq_gather_whole(q, c, buf, pages);
	rc = n < SQ_MIN_PAGES ? 0 : sq_keep(q, c, buf, IMG_CHUNK, pages, n, true);
	if (rc == 1) /* (the chunk stays the squeezer's until it returns) */
		sq_digest(q, c, buf, pages, n);
	return rc;
}

/* Copies chunk @c holds, without looking at a chunk that holds too few. */
static bool sq_worth(struct snap_squeeze *q, uint64_t c)
{
	uint64_t per = IMG_CHUNK / PAGE_SIZE, n = 0;

	for (uint64_t p = c * per; p < (c + 1) * per && n < SQ_MIN_PAGES; p++)
		n += ps_get(&q->pt->state[p]) == PS_COPIED;
	return n >= SQ_MIN_PAGES;
}

/* Pack the copies of chunk @c, which the squeezer claimed. Returns its next state. */
static uint8_t sq_pack_chunk(struct snap_squeeze *q, uint64_t c)
{
	uint64_t spans = IMG_CHUNK / q->span, s0 = c * spans;
	bool packed = false, room = true;

	if (sq_whole(q, c)) {
		int rc = sq_pack_whole(q, c);

		return rc == 1 ? SQ_PACKED : rc == 0 ? SQ_RAW : SQ_OPEN;
	}
	for (uint64_t s = s0; s < s0 + spans && room; s++) {
		int rc = sq_pack_span(q, s);

		packed = packed || rc == 1;
		room = rc >= 0;
	}
	return packed ? SQ_PACKED : room ? SQ_RAW : SQ_OPEN;
}

/* One chunk packed, the last in the writer's order that holds enough copies (with
 * @whole, only of those that can be packed whole); false when there was none. */
static bool sq_scan(struct snap_squeeze *q, bool whole)
{
	uint64_t chunks = q->size / IMG_CHUNK;
	uint64_t near = __atomic_load_n(q->write_at, __ATOMIC_ACQUIRE) + SQ_AHEAD;

	for (uint64_t i = chunks; i-- > near && sq_wanted(q);) {
		uint64_t c = q->pl->order[i];
		uint8_t expect = SQ_OPEN;

		if (__atomic_load_n(&q->state[c], __ATOMIC_ACQUIRE) != SQ_OPEN ||
		    !sq_worth(q, c) || (whole && !sq_whole(q, c)))
			continue;
		if (!__atomic_compare_exchange_n(&q->state[c], &expect, SQ_BUSY, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			continue;
		expect = sq_pack_chunk(q, c);
		__atomic_store_n(&q->state[c], expect, __ATOMIC_RELEASE);
		return expect != SQ_OPEN;
	}
	return false;
}

/* Chunks packed whole first: they cost one compression, which the image would spend
 * anyway; a chunk packed in part is compressed again when it is written. */
static bool sq_one(struct snap_squeeze *q)
{
	return sq_scan(q, true) || sq_scan(q, false);
}

/* While a snapshot's copies are wanted: pack whenever the pool is under pressure. */
static void sq_run(void *arg)
{
	struct snap_squeeze *q = arg;
	struct timespec nap = { .tv_nsec = SQ_NAP_NS };

	while (sq_wanted(q))
		if (!sq_pressure(q) || !sq_one(q))
			nanosleep(&nap, NULL);
	sq_arena_close(q);
}

static void *sq_thread(void *arg)
{
	struct snap_squeeze *q = arg;

	role_enter(ROLE_SNAPSHOT);
	worker_background(q->nice, q->idle); /* the writer's work, done early */
	pthread_mutex_lock(&q->w.lock);
	while (!q->w.stop) {
		if (!worker_serve(&q->w, sq_run, q))
			worker_wait(&q->w);
	}
	pthread_mutex_unlock(&q->w.lock);
	return NULL;
}

int squeeze_thread_start(struct snap_squeeze *q, int nice, bool idle)
{
	q->nice = nice;
	q->idle = idle;
	return worker_start(&q->w, sq_thread, q);
}

void squeeze_thread_stop(struct snap_squeeze *q)
{
	worker_stop(&q->w);
}

void squeeze_begin(struct snap_squeeze *q)
{
	worker_want(&q->w);
}

void squeeze_end(struct snap_squeeze *q)
{
	worker_unwant(&q->w);
}

void squeeze_claim(struct snap_squeeze *q, uint64_t c)
{
	struct timespec nap = { .tv_nsec = SQ_WAIT_NS };

	for (;;) {
		uint8_t now = __atomic_load_n(&q->state[c], __ATOMIC_ACQUIRE);

		if (now == SQ_PACKED) /* stays so for squeeze_unpack; the squeezer skips it */
			return;
		if (now != SQ_BUSY &&
		    __atomic_compare_exchange_n(&q->state[c], &now, SQ_WRITTEN, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return;
		nanosleep(&nap, NULL);
	}
}

/* The pack of span @s goes back to the pool. */
static void sq_drop(struct snap_squeeze *q, uint64_t s)
{
	struct sq_pack *k = &q->packs[s];

	pool_arena_back(q->pool, k->at, k->stored_pages);
	pool_count_packed(q->pool, -(long)k->raw_pages);
	memset(k, 0, sizeof(*k));
}

/* Page @p, whose bytes are now at @at in the stage, is saved. */
static void sq_saved(struct snap_squeeze *q, uint64_t p, const uint8_t *at)
{
	if (q->pt->pre[p])
		q->pt->pre_hash[p] = XXH3_64bits(at, PAGE_SIZE);
	ps_set(&q->pt->state[p], PS_SAVED);
}

/* Span @s's packed pages into @stage, which holds the bytes of the span's chunk. */
static int sq_unpack_span(struct snap_squeeze *q, uint64_t s, uint8_t *stage, uint8_t *buf)
{
	const struct sq_pack *k = &q->packs[s];
	uint64_t per = sq_span_pages(q), chunk_first = s * per / (IMG_CHUNK / PAGE_SIZE) *
						       (IMG_CHUNK / PAGE_SIZE), n = 0;
	int rc = codec_decompress(sq_codec(q), k->at, k->len, buf, (size_t)k->raw_pages * PAGE_SIZE);

	for (uint64_t p = s * per; !rc && p < (s + 1) * per; p++) {
		if (ps_get(&q->pt->state[p]) != PS_PACKED)
			continue;
		if (n == k->raw_pages) { /* more packed pages than the pack holds */
			rc = -EIO;
			break;
		}
		memcpy(stage + (p - chunk_first) * PAGE_SIZE, buf + n++ * PAGE_SIZE, PAGE_SIZE);
		sq_saved(q, p, stage + (p - chunk_first) * PAGE_SIZE);
	}
	if (!rc && n != k->raw_pages)
		rc = -EIO;
	sq_drop(q, s);
	return rc ? -EIO : 0;
}

/* Chunk @c's pages as its digest says: holes and data. -EIO unless every present
 * page was packed (none can have become a copy since: nothing was left protected). */
static int sq_whole_what(struct snap_squeeze *q, uint64_t c, uint8_t *what)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;
	const struct sq_digest *d = &q->digests[c];
	uint64_t n = 0;

	for (uint64_t i = 0, p = c * per; i < per; i++, p++) {
		enum page_state st = ps_get(&q->pt->state[p]);
		bool hole = d->hole[i / 8] >> (i % 8) & 1;

		if ((st != PS_PACKED && st != PS_ZERO) || (st == PS_ZERO && !hole))
			return -EIO;
		what[i] = hole ? IMG_PAGE_HOLE : IMG_PAGE_DATA;
		n += st == PS_PACKED;
	}
	return n == q->packs[c].raw_pages ? 0 : -EIO;
}

/* Chunk @c, packed whole, to the image as its frame: 1, with @ch prepared; 0 when the
 * image cannot take that frame (its bytes are then decompressed into the stage, to be
 * prepared and compressed as any chunk's); -EIO. */
static int sq_unpack_whole(struct snap_squeeze *q, uint64_t c, struct wq_chunk *ch,
			   uint64_t *zero)
{
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;
	const struct sq_pack *k = &q->packs[c];
	uint8_t what[IMG_CHUNK / PAGE_SIZE];
	int rc = sq_whole_what(q, c, what);

	if (rc)
		return rc;
	if (img_frame_check(q->img, c, k->len, what) == 0) {
		memcpy(ch->what, what, sizeof(what));
		rc = img_chunk_add_digest(q->img, c, ch->what, q->digests[c].hash, zero);
		memcpy(ch->buf, k->at, k->len);
		ch->frame_len = k->len;
		for (uint64_t p = c * per; p < (c + 1) * per; p++)
			if (ps_get(&q->pt->state[p]) == PS_PACKED)
				ps_set(&q->pt->state[p], PS_SAVED); /* pre_hash: set when packed */
		sq_drop(q, c);
		return rc ? rc : 1;
	}
	if (codec_decompress(sq_codec(q), k->at, k->len, ch->buf, IMG_CHUNK))
		return -EIO;
	for (uint64_t i = 0, p = c * per; i < per; i++, p++)
		if (ps_get(&q->pt->state[p]) == PS_PACKED)
			sq_saved(q, p, ch->buf + i * PAGE_SIZE);
	sq_drop(q, c);
	return 0;
}

int squeeze_unpack(struct snap_squeeze *q, uint64_t c, struct wq_chunk *ch, uint64_t *zero)
{
	uint64_t spans = IMG_CHUNK / q->span, s0 = c * spans;
	uint8_t *stage = ch->buf, *buf;
	int rc = 0;

	if (__atomic_load_n(&q->state[c], __ATOMIC_ACQUIRE) != SQ_PACKED)
		return 0;
	if (q->packs[s0].at && q->packs[s0].whole) {
		rc = sq_unpack_whole(q, c, ch, zero);
		__atomic_store_n(&q->state[c], SQ_WRITTEN, __ATOMIC_RELEASE);
		return rc;
	}
	buf = codec_thread_buffer(CODEC_BUF_CHUNK, IMG_CHUNK);
	if (!buf)
		return -ENOMEM; /* the snapshot fails; squeeze_reclaim drops the packs */
	for (uint64_t s = s0; s < s0 + spans; s++)
		if (q->packs[s].at) {
			int src = sq_unpack_span(q, s, stage, buf);

			rc = rc ? rc : src;
		}
	__atomic_store_n(&q->state[c], SQ_WRITTEN, __ATOMIC_RELEASE);
	return rc;
}

void squeeze_reclaim(struct snap_squeeze *q)
{
	uint64_t per = sq_span_pages(q);

	for (uint64_t s = 0; s < q->size / q->span; s++) {
		if (!q->packs[s].at)
			continue;
		for (uint64_t p = s * per; p < (s + 1) * per; p++)
			if (ps_get(&q->pt->state[p]) == PS_PACKED)
				ps_set(&q->pt->state[p], PS_SAVED);
		sq_drop(q, s);
	}
}
