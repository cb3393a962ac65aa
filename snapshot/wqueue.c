/*
 * wqueue.c - a snapshot's writes on their own thread.
 *
 * The writer stages a chunk (copies, takes, unprotects, hashes: CPU work) and then has
 * to wait for the disk. Written from one thread, the two add up: 2 MiB written with
 * O_DIRECT takes ~2.5 ms here and staging ~0.5 ms, so a writer that does both reached
 * ~60% of what dd reaches on the same file system. Here the writer stages into one of
 * WQ_DEPTH buffers while an I/O thread writes the oldest one, so the disk is kept busy
 * as long as the writer stays ahead. A ring: the writer fills slot[(head + count) %
 * WQ_DEPTH], the I/O thread empties slot[head].
 */
#include "wqueue.h"
#include "cow.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

int wq_init(struct wqueue *q)
{
	memset(q, 0, sizeof(*q));
	for (int i = 0; i < WQ_DEPTH; i++) {
		q->slot[i].buf = mmap(NULL, IMG_CHUNK, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (q->slot[i].buf == MAP_FAILED) {
			q->slot[i].buf = NULL;
			wq_fini(q);
			return -ENOMEM;
		}
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cv, NULL);
	return 0;
}

void wq_fini(struct wqueue *q)
{
	for (int i = 0; i < WQ_DEPTH; i++)
		if (q->slot[i].buf)
			munmap(q->slot[i].buf, IMG_CHUNK);
	if (q->slot[0].buf) {
		pthread_mutex_destroy(&q->lock);
		pthread_cond_destroy(&q->cv);
	}
	memset(q, 0, sizeof(*q));
}

static void *wq_io_thread(void *arg)
{
	struct wqueue *q = arg;

	cow_nice(q->nice);
	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct wq_chunk *ch;
		int rc;

		while (!q->count && !q->closing)
			pthread_cond_wait(&q->cv, &q->lock);
		if (!q->count)
			break;
		ch = &q->slot[q->head];
		pthread_mutex_unlock(&q->lock);
		rc = q->rc ? 0 : img_chunk_write(q->img, ch->c, ch->buf, ch->what);
		pthread_mutex_lock(&q->lock);
		if (rc && !q->rc)
			q->rc = rc;
		q->head = (q->head + 1) % WQ_DEPTH;
		q->count--;
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int wq_start(struct wqueue *q, struct img_writer *img, int nice)
{
	q->img = img;
	q->nice = nice;
	q->head = q->count = 0;
	q->rc = 0;
	q->closing = false;
	if (pthread_create(&q->io, NULL, wq_io_thread, q))
		return -EAGAIN;
	q->running = true;
	return 0;
}

struct wq_chunk *wq_next(struct wqueue *q)
{
	struct wq_chunk *ch = NULL;

	pthread_mutex_lock(&q->lock);
	while (q->count == WQ_DEPTH && !q->rc)
		pthread_cond_wait(&q->cv, &q->lock);
	if (!q->rc)
		ch = &q->slot[(q->head + q->count) % WQ_DEPTH];
	pthread_mutex_unlock(&q->lock);
	return ch;
}

void wq_push(struct wqueue *q)
{
	pthread_mutex_lock(&q->lock);
	q->count++;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
}

int wq_finish(struct wqueue *q)
{
	int rc;

	if (!q->running)
		return 0;
	pthread_mutex_lock(&q->lock);
	q->closing = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->io, NULL);
	q->running = false;
	rc = q->rc;
	return rc;
}
