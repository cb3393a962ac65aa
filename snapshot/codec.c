/*
 * codec.c - compression of a snapshot's memory chunks with Debian's libzstd and liblz4.
 *
 * A chunk (2 MiB of guest memory) is compressed as one frame: on 4 KiB blocks zstd is
 * three times slower and compresses less (docs/evaluation.md, "Snapshot storage"), so
 * a page is never compressed alone. zstd keeps a compression context per thread, made
 * on first use and freed when the thread exits, because making one costs as much as
 * compressing a small chunk; the writer's threads compress many chunks each. LZ4's
 * fast mode keeps its state on the stack. Decompression checks that a frame gives
 * exactly one chunk, so a damaged or forged frame is an error, never an overrun.
 */
#include "codec.h"
#include "../base/pages.h"

#include <errno.h>
#include <lz4.h>
#include <lz4hc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#define CODEC_ZSTD_MIN_LEVEL (-7)  /* zstd's fast levels below that barely differ */
#define CODEC_ZSTD_MAX_LEVEL 19    /* 20 and up need more than a chunk's window */

/* What a thread keeps: contexts, and a buffer for reading compressed bytes back. */
struct codec_tls {
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	void *buf[CODEC_NBUF];
	size_t buf_len[CODEC_NBUF];
};

static pthread_key_t codec_key;
static pthread_once_t codec_once = PTHREAD_ONCE_INIT;

static void codec_tls_free(void *p)
{
	struct codec_tls *t = p;

	ZSTD_freeCCtx(t->cctx);
	ZSTD_freeDCtx(t->dctx);
	for (int i = 0; i < CODEC_NBUF; i++)
		free(t->buf[i]);
	free(t);
}

static void codec_key_make(void)
{
	(void)pthread_key_create(&codec_key, codec_tls_free);
}

static struct codec_tls *codec_tls(void)
{
	struct codec_tls *t;

	pthread_once(&codec_once, codec_key_make);
	t = pthread_getspecific(codec_key);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (t && pthread_setspecific(codec_key, t)) {
		free(t);
		t = NULL;
	}
	return t;
}

static const char *const codec_names[IMG_CODEC_NR] = { "none", "lz4", "zstd", "auto" };

const char *codec_name(enum img_codec c)
{
	return (unsigned)c < IMG_CODEC_NR ? codec_names[c] : "unknown";
}

const char *codec_stored_name(enum img_codec c)
{
	return c == IMG_CODEC_NONE ? "raw" : codec_name(c);
}

int codec_parse(const char *name, enum img_codec *c)
{
	for (int i = 0; i < IMG_CODEC_NR; i++)
		if (strcmp(name, codec_names[i]) == 0) {
			*c = (enum img_codec)i;
			return 0;
		}
	return -EINVAL;
}

int codec_default_level(enum img_codec c)
{
	switch (c) {
	case IMG_CODEC_ZSTD:
		return CODEC_ZSTD_DEFAULT_LEVEL;
	case IMG_CODEC_LZ4:
		return CODEC_LZ4_DEFAULT_LEVEL;
	default:
		return 0;
	}
}

int codec_level_check(enum img_codec c, int level)
{
	switch (c) {
	case IMG_CODEC_ZSTD:
		return level >= CODEC_ZSTD_MIN_LEVEL && level <= CODEC_ZSTD_MAX_LEVEL && level ? 0 : -EINVAL;
	case IMG_CODEC_LZ4:
		return level >= CODEC_LZ4_MIN_LEVEL && level <= LZ4HC_CLEVEL_MAX && level ? 0 : -EINVAL;
	case IMG_CODEC_NONE:
	case IMG_CODEC_AUTO:
		return level == 0 ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

size_t codec_bound(size_t len)
{
	size_t z = ZSTD_compressBound(len), l = (size_t)LZ4_compressBound((int)len);

	return z > l ? z : l;
}

static ssize_t codec_zstd(int level, const void *src, size_t len, void *dst, size_t cap)
{
	struct codec_tls *t = codec_tls();
	size_t n;

	if (!t)
		return -ENOMEM;
	if (!t->cctx)
		t->cctx = ZSTD_createCCtx();
	if (!t->cctx)
		return -ENOMEM;
	n = ZSTD_compressCCtx(t->cctx, dst, cap, src, len, level);
	if (ZSTD_isError(n))
		return ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall ? -ENOSPC : -EIO;
	return (ssize_t)n;
}

ssize_t codec_compress(enum img_codec c, int level, const void *src, size_t len, void *dst,
		       size_t cap)
{
	int n;

	if (codec_level_check(c, level) || c == IMG_CODEC_NONE || c == IMG_CODEC_AUTO)
		return -EINVAL;
	if (c == IMG_CODEC_ZSTD)
		return codec_zstd(level, src, len, dst, cap);
	if (len > LZ4_MAX_INPUT_SIZE || cap > (size_t)INT32_MAX)
		return -EINVAL;
	if (level > 1)
		n = LZ4_compress_HC(src, dst, (int)len, (int)cap, level);
	else /* below 1: LZ4's acceleration, as `lz4 --fast=N` */
		n = LZ4_compress_fast(src, dst, (int)len, (int)cap, level < 0 ? -level : 1);
	return n > 0 ? (ssize_t)n : -ENOSPC;
}

static int codec_unzstd(const void *src, size_t len, void *dst, size_t out_len)
{
	struct codec_tls *t = codec_tls();
	size_t n;

	if (!t)
		return -ENOMEM;
	if (!t->dctx)
		t->dctx = ZSTD_createDCtx();
	if (!t->dctx)
		return -ENOMEM;
	/* One frame, whose decoded size must be exactly a chunk: a frame that claims
	 * more (gVisor #9149) fails on the output bound, never allocates. */
	n = ZSTD_decompressDCtx(t->dctx, dst, out_len, src, len);
	return !ZSTD_isError(n) && n == out_len ? 0 : -EBADMSG;
}

int codec_decompress(enum img_codec c, const void *src, size_t len, void *dst, size_t out_len)
{
	int n;

	switch (c) {
	case IMG_CODEC_ZSTD:
		return codec_unzstd(src, len, dst, out_len);
	case IMG_CODEC_LZ4:
		if (len > (size_t)INT32_MAX || out_len > (size_t)INT32_MAX)
			return -EBADMSG;
		n = LZ4_decompress_safe(src, dst, (int)len, (int)out_len);
		return n >= 0 && (size_t)n == out_len ? 0 : -EBADMSG;
	default:
		return -EBADMSG;
	}
}

void *codec_thread_buffer(enum codec_buf which, size_t len)
{
	struct codec_tls *t = codec_tls();

	if (!t || (unsigned)which >= CODEC_NBUF)
		return NULL;
	if (t->buf_len[which] < len) {
		free(t->buf[which]);
		t->buf_len[which] = 0;
		/* Page aligned: a frame may be read into it with O_DIRECT (img_reader_direct). */
		len = (len + PAGE_SIZE - 1) & ~(size_t)(PAGE_SIZE - 1);
		if (posix_memalign(&t->buf[which], PAGE_SIZE, len)) {
			t->buf[which] = NULL;
			return NULL;
		}
		t->buf_len[which] = len;
	}
	return t->buf[which];
}
