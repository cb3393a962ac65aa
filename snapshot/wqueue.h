/*
 * wqueue.h - staged chunks of a snapshot handed to an I/O thread, so that staging the
 * next chunk overlaps writing this one (snapshot/wqueue.c).
 */
#ifndef CCVM_WQUEUE_H
#define CCVM_WQUEUE_H

#include "image.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define WQ_DEPTH 4 /* chunks staged ahead of the disk */

struct wq_chunk {
	uint8_t *buf;                       /* IMG_CHUNK bytes, page aligned */
	uint8_t what[IMG_CHUNK / PAGE_SIZE]; /* enum img_page_what */
	uint64_t c;
};

struct wqueue {
	struct wq_chunk slot[WQ_DEPTH];
	int head, count;                    /* queued chunks: slot[head .. head + count) */
	bool closing;
	int rc;                             /* the first write error */
	struct img_writer *img;
	int nice;
	pthread_t io;
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t cv;
};

/* Buffers for WQ_DEPTH chunks, kept for every snapshot. Returns 0 or -ENOMEM. */
int wq_init(struct wqueue *q);
void wq_fini(struct wqueue *q);

/* Start the I/O thread for one image, @nice levels below the caller (from which it
 * inherits its priority). */
int wq_start(struct wqueue *q, struct img_writer *img, int nice);
/* A free chunk to stage into (waits while all are queued); NULL after a write error. */
struct wq_chunk *wq_next(struct wqueue *q);
/* Queue the chunk wq_next gave, staged and prepared (img_chunk_prepare). */
void wq_push(struct wqueue *q);
/* Wait for every queued write; stop the thread. Returns 0 or the first -errno. */
int wq_finish(struct wqueue *q);

#endif
