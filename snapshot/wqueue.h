/*
 * wqueue.h - staged chunks of a snapshot handed to I/O threads that compress and write
 * them, so that staging the next chunk overlaps storing this one (snapshot/wqueue.c).
 */
#ifndef CCVM_WQUEUE_H
#define CCVM_WQUEUE_H

#include "image.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define WQ_DEPTH 4        /* chunks staged ahead of the I/O threads, besides one each */
#define WQ_THREADS_MAX 16 /* --snapshot-threads (SNAP_THREADS_MAX) */
#define WQ_SLOTS (WQ_DEPTH + WQ_THREADS_MAX)

enum wq_slot_state { WQ_FREE = 0, WQ_STAGING, WQ_QUEUED, WQ_BUSY };

struct wq_chunk {
	uint8_t *buf;                       /* IMG_CHUNK bytes, page aligned */
	const uint8_t *data;                /* what is stored: buf, or memory nobody writes */
	uint32_t frame_len;                 /* or, when not 0: buf holds the chunk's frame */
	uint8_t what[IMG_CHUNK / PAGE_SIZE]; /* enum img_page_what */
	uint64_t c;
	uint64_t seq;                       /* queued chunks are stored oldest first */
	enum wq_slot_state state;
};

struct wqueue {
	struct wq_chunk slot[WQ_SLOTS];
	uint8_t *scratch[WQ_THREADS_MAX];   /* each I/O thread compresses into its own */
	int n_slots, n_threads;             /* in use by this snapshot */
	int n_started;                      /* threads that took their scratch buffer */
	uint64_t next_seq;
	int queued;
	bool closing;
	int rc;                             /* the first write error */
	struct img_writer *img;
	int nice;
	pthread_t io[WQ_THREADS_MAX];
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t cv;
};

/* The memory a snapshot's writer takes with @threads I/O threads: its staged chunks
 * and each thread's compression buffer. */
size_t wq_memory(int threads);

/* Address space for every buffer, kept for every snapshot; memory is only used by
 * the slots and threads a snapshot runs with. Returns 0 or -ENOMEM. */
int wq_init(struct wqueue *q);
void wq_fini(struct wqueue *q);

/* Start @threads (1..WQ_THREADS_MAX) I/O threads for one image, @nice levels below
 * the caller (from which they inherit their priority). */
int wq_start(struct wqueue *q, struct img_writer *img, int threads, int nice);
/* A free chunk to stage into (waits while all are queued); NULL after a write error. */
struct wq_chunk *wq_next(struct wqueue *q);
/* Queue @ch, which wq_next gave, staged and prepared (img_chunk_prepare). */
void wq_push(struct wqueue *q, struct wq_chunk *ch);
/* Wait for every queued write; stop the threads. Returns 0 or the first -errno. */
int wq_finish(struct wqueue *q);

#endif
