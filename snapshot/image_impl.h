/*
 * image_impl.h - what the parts of the image format share (image.c: files and
 * directories; image_write.c; image_chunk.c: chunk framing; image_read.c): the layout's
 * constants, the writer's state, and the helpers each of them uses.
 */
#ifndef CCVM_IMAGE_IMPL_H
#define CCVM_IMAGE_IMPL_H

#include "image.h"
#include "../mmu/layout.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <xxhash.h>

#define IMG_MAGIC     "CCVMIMG"   /* 8 bytes with the NUL */
#define IMG_END_MAGIC "CCVMEND"
#define IMG_HDR_SIZE  64
#define IMG_TRAILER   48
#define IMG_TABLE_ENT 32
#define IMG_MAX_RAM   LAYOUT_MAX_RAM /* no VM of ccvm is larger: no image either */
#define IMG_ENC_HEAD  16  /* encoding section: u32 codec, i32 level, 8 reserved */
#define IMG_ENC_ENT   16  /* then per chunk: u8 codec, u8 0, u16 pages, u32 len, u64 hash */
#define IMG_PAGES_PER_CHUNK (IMG_CHUNK / PAGE_SIZE)
#define IMG_PATCH_HEAD 16 /* patches section: u64 entries, u64 0 */
#define IMG_PATCH_ENT  16 /* then per page, in page order: u64 page, u64 file offset */
#define IMG_FILE_MODE 0600 /* images are their user's alone, whatever the umask */


struct img_writer {
	int fd;
	int dfd;               /* the same file opened O_DIRECT for memory, or -1 */
	int dir;               /* the directory it is written in: every name is in it */
	dev_t dev;             /* the temporary's identity, to tell it from whatever */
	ino_t ino;             /* else gets under its name */
	char *final_path;      /* as given, for messages */
	char *final_name;      /* its last component, in dir */
	char *tmp_name;        /* the temporary, in dir */
	struct img_header_info info;
	uint64_t n_chunks;
	uint64_t *chunk_hash;  /* summed atomically */
	uint32_t *chunk_pages; /* data pages per chunk, counted atomically */
	struct img_chunk_enc *enc; /* set by the one thread that writes the chunk */
	uint64_t stored;       /* bytes the data takes in the file, added atomically */
	uint8_t *held;         /* a child: a bit per page it holds, set atomically */
	char *parent_path;     /* a child: its parent, as recorded */
	uint64_t parent_identity;
	/* A pre-copy (image_pre.c): per page, the checksum share of its bytes as last
	 * written before the instant, and IMG_PRE_* bits. NULL without one. */
	uint64_t *pre_hash;
	uint8_t *pre_bits;
	/* Rounds that compress (image_pre.c): round 0 gathers each chunk and stores it as
	 * a frame when that saves a page; a framed chunk's pages written afterwards each
	 * get a slot of 4 KiB after the memory, kept for that page. */
	struct {
		bool gathering;    /* round 0: pages are gathered into their chunk */
		uint64_t cur;      /* the chunk being gathered, or UINT64_MAX */
		uint8_t *buf;      /* its bytes, pages not gathered zero */
		uint8_t *scratch;  /* compressing's */
		uint64_t got[IMG_PAGES_PER_CHUNK / 64]; /* its pages gathered */
		uint8_t *chunk;    /* per chunk: IMG_PRE_CHUNK_* */
		uint64_t *slot;    /* per page: its slot's file offset, 0 for none */
		uint64_t n;        /* pages with a slot (atomic) */
		bool reserved;     /* the instant's slots are set aside: taken from here */
		uint64_t res_next, res_end; /* (res_next atomic) */
	} pre;
	struct codec_auto own_auto; /* the rates measured, when nobody lends its own */
	struct codec_auto *autoc;
	int n_sections;
	struct {
		uint32_t type;
		void *data;
		size_t len;
		bool in_file;      /* streamed: already in the file at @off, with @hash */
		uint64_t off, hash;
	} sec[IMG_MAX_SECTIONS];
	/* The section being streamed (img_stream_*): written as it comes, after the memory
	 * and any streamed before it; a writer of sections only hands each record to
	 * @sink instead. */
	struct {
		bool open;
		uint32_t type;
		uint64_t start, len;
		XXH3_state_t *xxh;
	} stream;
	/* Where the next patch slot or streamed section goes: the memory's end at first,
	 * then past each slot (taken atomically) and each streamed section. A section is
	 * never streamed while pages are being written (img_stream_begin: the pause, or
	 * after the memory writer). */
	uint64_t tail;
	img_record_sink *sink;
	void *sink_ctx;
	bool replace_only;         /* img_replaces: the final name must still be this file */
	dev_t replace_dev;
	ino_t replace_ino;
};

static inline void img_put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static inline void img_put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static inline uint32_t img_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t img_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* The last component of @path, or NULL when it names no file in a directory ("",
 * ".", "..", a trailing '/'). */
const char *img_base(const char *path);

/* Bit @i of the bitmap @bits (a child's page mask). */
bool img_bit_test(const uint8_t *bits, uint64_t i);

/* The checksum the trailer ends with: of the section table (@n_sections entries) and
 * the trailer's first IMG_TRAILER_HASHED bytes. 0 or -ENOMEM. */
#define IMG_TRAILER_HASHED 40
int img_table_hash(const uint8_t *table, int n_sections, const uint8_t *trailer, uint64_t *h);

/* The checksum of a chunk: of every page, or of the pages set in @mask (a child's,
 * indexed by page number) when it is given. */
uint64_t img_chunk_hash(uint64_t first_pfn, const void *chunk, const uint8_t *mask);

/* Open the directory part of @path (relative to @at) with @flags; *base is set to its
 * last component, which must name something in it (not "", "." or ".."). */
int img_dir_at(int at, const char *path, int flags, const char **base);

/* The descriptor for memory: the temporary again, as its own open file, with O_DIRECT
 * set where the file system takes it (-1 where it does not: buffered writes). */
int img_direct_fd(int fd);

/* The header of an image described by @info, its checksum included. */
void img_header_encode(uint8_t hdr[IMG_HDR_SIZE], const struct img_header_info *info);

/* A page's part of its chunk's checksum: XXH3-64 seeded with its page number. */
uint64_t img_page_hash(uint64_t pfn, const void *page);

/* All @len bytes at @off, or -errno (-EIO for a short file). */
int img_pread_all(int fd, void *buf, size_t len, uint64_t off);
int img_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/* @n data pages of chunk @c recorded, raw. */
void img_count_raw(struct img_writer *w, uint64_t c, uint64_t n);

/* What a pre-copy did to a page (img_writer's pre_bits). */
#define IMG_PRE_SEEN  1 /* written ahead of the instant: pre_hash holds its share */
#define IMG_PRE_DATA  2 /* and its last bytes were not all zero */
#define IMG_PRE_BYTES 4 /* the file holds bytes there (zeros too): not a hole */
#define IMG_PRE_KEPT  8 /* those bytes stand for the instant */

/* What round 0 made of a chunk (img_writer's pre.chunk). */
#define IMG_PRE_CHUNK_NONE   0 /* not reached: raw */
#define IMG_PRE_CHUNK_RAW    1 /* its pages at their places */
#define IMG_PRE_CHUNK_FRAMED 2 /* one frame: pages written since go to patch slots */

/* A 4 KiB page of zeros. */
const void *img_zero_page(void);

/* A temporary name for the image @final_name (image_tmp.c), or NULL; and the
 * temporaries of @w's name that writers which died left, removed. */
char *img_tmp_name_for(const char *final_name);
void img_sweep_stale(const struct img_writer *w);

/* Chunk @c is a round 0 frame: a page written into it goes to its patch slot. */
static inline bool img_pre_framed(const struct img_writer *w, uint64_t c)
{
	return w->pre.chunk && w->pre.chunk[c] == IMG_PRE_CHUNK_FRAMED;
}


/* Must page @pfn, saved as a hole, be written as zeros (a pre-copy left bytes there)? */
static inline bool img_pre_stale(const struct img_writer *w, uint64_t pfn)
{
	return w->pre_bits && (w->pre_bits[pfn] & (IMG_PRE_BYTES | IMG_PRE_KEPT)) == IMG_PRE_BYTES;
}

/* A child holds page @pfn (its data, or a zero page over the parent's). */
void img_hold(struct img_writer *w, uint64_t pfn);

/* @len bytes of memory at @off of the image: through the O_DIRECT descriptor when the
 * run is long and aligned enough, else buffered. 0 or -errno. */
int img_write_mem(struct img_writer *w, const void *data, size_t len, uint64_t off);

/* Whether page @pfn, whose bytes are at @page, goes to the file. */
typedef bool (*img_take_fn)(struct img_writer *w, uint64_t pfn, const uint8_t *page,
			    const void *ctx);

/* Write the pages @pfn.. of @data (@n of them) that @take accepts, each run of
 * neighbours in one write at its place. 0 or -errno. */
int img_write_runs(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n,
		   img_take_fn take, const void *ctx);

/* Pages @pfn.. of @data (@n, in one chunk that is framed) that @take accepts, each
 * into its patch slot (taken the first time), neighbouring slots in one write. 0 or
 * -errno. */
int img_patch_runs(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n,
		   img_take_fn take, const void *ctx);

/* The patches section of a writer whose framed chunks took slots (none: 0 and no
 * section), and the header flag that makes older readers refuse the image. */
int img_patch_section(struct img_writer *w, uint8_t **buf, size_t *len);

/* Chunk @c as a frame of @data (IMG_CHUNK bytes, @pages data pages, holes zero):
 * compressed with the image's codec (auto's choice) into @scratch, kept only when it
 * saves a page, @count pages added to the chunk's data pages. 1 when it is to be
 * stored raw, 0 when written, or -errno. */
int img_chunk_frame(struct img_writer *w, uint64_t c, const void *data, uint64_t pages,
		    uint64_t count, uint8_t *scratch);

#endif
