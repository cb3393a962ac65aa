/*
 * codec.h - compression of a snapshot's memory chunks (zstd, LZ4), for image.c.
 */
#ifndef CCVM_CODEC_H
#define CCVM_CODEC_H

#include <stddef.h>
#include <sys/types.h>

/* Numbers are stored in images: never renumber. A chunk is stored with one below
 * IMG_CODEC_AUTO; auto is what an image's header records when the writer chose a codec
 * and level for each chunk (codec_auto.h), and never compresses anything itself. */
enum img_codec { IMG_CODEC_NONE = 0, IMG_CODEC_LZ4 = 1, IMG_CODEC_ZSTD = 2, IMG_CODEC_AUTO = 3,
		 IMG_CODEC_NR };

/* What `--compress` means when no level is given: zstd's fastest regular level,
 * LZ4's default (levels 2 and up are LZ4's high-compression mode, levels below 0 its
 * acceleration, as `lz4 --fast=N`: on Redis' memory -4 stores as little as 1 and
 * compresses 1.5 times as fast). */
#define CODEC_ZSTD_DEFAULT_LEVEL 1
#define CODEC_LZ4_DEFAULT_LEVEL 1
#define CODEC_LZ4_MIN_LEVEL (-64)
/* The levels each codec takes, as error messages name them (codec_level_check). */
#define CODEC_LEVEL_RANGES "zstd -7 to 19, lz4 -64 to 12"

const char *codec_name(enum img_codec c);
/* How a chunk stored with @c reads in figures and inspect: "raw" for none. */
const char *codec_stored_name(enum img_codec c);
/* "none", "lz4", "zstd" or "auto"; -EINVAL for anything else. */
int codec_parse(const char *name, enum img_codec *c);
int codec_default_level(enum img_codec c);
/* 0 when @level is one @c takes (zstd -7..19 and lz4 -64..12, 0 in neither; none and
 * auto 0), else -EINVAL. */
int codec_level_check(enum img_codec c, int level);

/* The most bytes compressing @len bytes can give. */
size_t codec_bound(size_t len);

/* Compress @len bytes of @src into @dst (@cap bytes): the compressed length, or
 * -ENOSPC when it does not fit, or -errno. Each thread keeps its own context. */
ssize_t codec_compress(enum img_codec c, int level, const void *src, size_t len, void *dst,
		       size_t cap);

/* Decompress @len bytes of @src into exactly @out_len bytes at @dst: 0, or -EBADMSG
 * when the input is not a valid frame of that size. */
int codec_decompress(enum img_codec c, const void *src, size_t len, void *dst, size_t out_len);

/* Buffers a thread keeps: a frame read back from an image, a chunk of an incremental
 * image decoded before its pages go over its parent's, and a child's held pages packed
 * (before compressing, after decompressing). */
enum codec_buf { CODEC_BUF_FRAME = 0, CODEC_BUF_CHUNK = 1, CODEC_BUF_PACKED = 2, CODEC_NBUF };

/* Buffer @which of at least @len bytes owned by the calling thread (freed when it
 * exits). NULL when out of memory. */
void *codec_thread_buffer(enum codec_buf which, size_t len);

#endif
