/*
 * wqueue.c - a snapshot's compression and writes on their own threads.
 *
 * The writer stages a chunk (copies, takes, unprotects, hashes: CPU work) and then has
 * to wait for it to be compressed and for the disk. Done on one thread, these add up:
 * 2 MiB written with O_DIRECT takes ~2.5 ms here and staging ~0.5 ms, so a writer that
 * did both reached ~60% of what dd reaches on the same file system, and zstd at ~0.5
 * GB/s per core is slower than the disk. So the writer stages into one of a few
 * buffers while N I/O threads each take the oldest queued chunk, compress it into
 * their own scratch buffer and write it. Every chunk has its own place in the image,
 * so chunks finished out of order need no reordering; the oldest-first pick keeps the
 * writes nearly sequential.
 */
#include "wqueue.h"
#include "../base/role.h"
#include "../base/worker.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

/* Address space only: pages are touched (and kept) by the snapshots that use them. */
static uint8_t *wq_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

size_t wq_memory(int threads)
{
	return (size_t)(WQ_DEPTH + threads) * IMG_CHUNK + (size_t)threads * IMG_SCRATCH_SIZE;
}

int wq_init(struct wqueue *q)
{
	memset(q, 0, sizeof(*q));
	for (int i = 0; i < WQ_SLOTS; i++)
		if (!(q->slot[i].buf = wq_map(IMG_CHUNK)))
			goto fail;
	for (int i = 0; i < WQ_THREADS_MAX; i++)
		if (!(q->scratch[i] = wq_map(IMG_SCRATCH_SIZE)))
			goto fail;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cv, NULL);
	return 0;
fail:
	wq_fini(q);
	return -ENOMEM;
}

void wq_fini(struct wqueue *q)
{
	bool inited = q->scratch[WQ_THREADS_MAX - 1] != NULL;

	for (int i = 0; i < WQ_SLOTS; i++)
		if (q->slot[i].buf)
			munmap(q->slot[i].buf, IMG_CHUNK);
	for (int i = 0; i < WQ_THREADS_MAX; i++)
		if (q->scratch[i])
			munmap(q->scratch[i], IMG_SCRATCH_SIZE);
	if (inited) {
		pthread_mutex_destroy(&q->lock);
		pthread_cond_destroy(&q->cv);
	}
	memset(q, 0, sizeof(*q));
}

/* The oldest queued chunk, or NULL. Called with the lock held. */
static struct wq_chunk *wq_oldest(struct wqueue *q)
{
	struct wq_chunk *best = NULL;

	for (int i = 0; i < q->n_slots; i++)
		if (q->slot[i].state == WQ_QUEUED && (!best || q->slot[i].seq < best->seq))
			best = &q->slot[i];
	return best;
}

static void *wq_io_thread(void *arg)
{
	struct wqueue *q = arg;
	uint8_t *scratch;

	role_enter(ROLE_SNAPSHOT);
	worker_nice(q->nice);
	pthread_mutex_lock(&q->lock);
	scratch = q->scratch[q->n_started++];
	for (;;) {
		struct wq_chunk *ch;
		int rc;

		while (!(ch = wq_oldest(q)) && !q->closing)
			pthread_cond_wait(&q->cv, &q->lock);
		if (!ch)
			break;
		ch->state = WQ_BUSY;
		pthread_mutex_unlock(&q->lock);
		rc = q->rc ? 0 : ch->frame_len ?
			img_chunk_write_frame(q->img, ch->c, ch->buf, ch->frame_len, ch->what) :
			img_chunk_write(q->img, ch->c, ch->data, ch->what, scratch);
		pthread_mutex_lock(&q->lock);
		if (rc && !q->rc)
			q->rc = rc;
		ch->state = WQ_FREE;
		q->queued--;
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int wq_start(struct wqueue *q, struct img_writer *img, int threads, int nice)
{
	if (threads < 1 || threads > WQ_THREADS_MAX)
		return -EINVAL;
	q->img = img;
	q->nice = nice;
	q->n_threads = 0;
	q->n_started = 0;
	q->n_slots = WQ_DEPTH + threads;
	q->queued = 0;
	q->rc = 0;
	q->closing = false;
	for (int i = 0; i < WQ_SLOTS; i++)
		q->slot[i].state = WQ_FREE;
	for (int i = 0; i < threads; i++) {
		if (pthread_create(&q->io[i], NULL, wq_io_thread, q))
			break;
		q->n_threads++;
	}
	q->running = q->n_threads > 0;
	if (q->n_threads == threads)
		return 0;
	wq_finish(q);
	return -EAGAIN;
}

struct wq_chunk *wq_next(struct wqueue *q)
{
	struct wq_chunk *ch = NULL;

	pthread_mutex_lock(&q->lock);
	while (!q->rc) {
		for (int i = 0; i < q->n_slots && !ch; i++)
			if (q->slot[i].state == WQ_FREE)
				ch = &q->slot[i];
		if (ch)
			break;
		pthread_cond_wait(&q->cv, &q->lock);
	}
	if (ch) {
		ch->state = WQ_STAGING;
		ch->frame_len = 0;
	}
	pthread_mutex_unlock(&q->lock);
	return ch;
}

void wq_push(struct wqueue *q, struct wq_chunk *ch)
{
	pthread_mutex_lock(&q->lock);
	ch->state = WQ_QUEUED;
	ch->seq = q->next_seq++;
	q->queued++;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
}

int wq_finish(struct wqueue *q)
{
	if (!q->running)
		return q->rc;
	pthread_mutex_lock(&q->lock);
	q->closing = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; i < q->n_threads; i++)
		pthread_join(q->io[i], NULL);
	q->running = false;
	return q->rc;
}
