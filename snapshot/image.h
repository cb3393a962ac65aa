/*
 * image.h - the snapshot image file: header, memory at fixed offsets, checksummed
 * sections, trailer. Knows nothing about VMs: sections are typed bytes.
 */
#ifndef CCVM_IMAGE_H
#define CCVM_IMAGE_H

#include "../base/pages.h"
#include "codec.h"
#include "codec_auto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define IMG_VERSION     3 /* written (3: trees of processes); 1 (no compression) and 2 are read */
#define IMG_VERSION_OLDEST 1
#define IMG_CHUNK       HUGE_SIZE /* a checksum per 2 MiB of guest memory */
#define IMG_MEM_OFFSET  (1ULL << 20) /* memory starts here: page p at IMG_MEM_OFFSET + p*4 KiB */
#define IMG_MAX_SECTIONS 16
#define IMG_MAX_CHAIN   64 /* images a restore follows from a child to its full ancestor */
#define IMG_PATH_MAX    4096
/* The longest section of each kind a reader takes (a writer makes): a section is
 * allocated whole, and a sparse file can claim any length. The vCPUs: 64 of about
 * 4.5 KiB; the process state: JSON of at most 65530 mappings and 4096 descriptors. */
#define IMG_MAX_VCPUS_LEN   (1ULL << 20)
#define IMG_MAX_PROCESS_LEN (64ULL << 20)
#define IMG_MAX_OTHER_LEN   (1ULL << 20) /* info, and kinds this version does not know */
/* The processes besides the first (63 at most, each in a window of the RAM's size) keep
 * at most this many times the RAM of their own in an image, streamed a block at a time
 * (docs/processes.md); their shared memory objects at most IMG_SHM_RAM_TIMES. */
#define IMG_WINDOWS_RAM_TIMES 63
#define IMG_SHM_RAM_TIMES     4

/* Header flags. A reader refuses any it does not know: a child read as a full image
 * would restore silently wrong. */
#define IMG_FLAG_CHILD  1u /* incremental: only the pages written since its parent */
#define IMG_FLAG_PATCHED 2u /* pages of framed chunks stand in the patch area (section 12) */
#define IMG_FLAGS_KNOWN (IMG_FLAG_CHILD | IMG_FLAG_PATCHED)
#define IMG_ERR_LEN     512

enum img_section_type {
	IMG_SEC_VCPUS = 1,    /* vCPU register state (opaque to this module) */
	IMG_SEC_PROCESS = 2,  /* personality state (JSON) */
	IMG_SEC_CHUNKS = 3,   /* per-chunk checksums of memory (written by img_finish) */
	IMG_SEC_INFO = 4,     /* free-form figures (JSON) */
	IMG_SEC_ENCODING = 5, /* version 2: how each chunk is stored (written by img_finish) */
	IMG_SEC_PARENT = 6,   /* a child's parent: its identity (u64), then its path */
	IMG_SEC_PAGEMASK = 7, /* a child's pages: a bit per page, set for each it holds */
	IMG_SEC_TREE = 8,     /* version 3: the processes besides the first (JSON) */
	IMG_SEC_WINDOWS = 9,  /* version 3: their own memory, 2 MiB blocks with their place */
	IMG_SEC_SHM = 10,     /* version 3: memfds and shared anonymous memory, each once */
	IMG_SEC_CPU = 11,     /* the CPU features the saved state may depend on (vmm/cpufeat.h);
			       * an image without it (older ccvm) is restored unchecked */
	IMG_SEC_PATCHES = 12, /* pages written after their chunk's frame: where each stands
			       * (written by img_finish; IMG_FLAG_PATCHED) */
};
/* The last kind a migration stream carries (the patches are a file's layout, never sent). */
#define IMG_SEC_LAST IMG_SEC_CPU

/* The longest a section of @type may be in an image of @ram_size bytes of RAM: the
 * tables derived from the RAM size exactly, the others their own bound (a migration
 * stream's receiver holds its sections to the same, migstream.c). */
uint64_t img_section_max(uint32_t type, uint64_t ram_size);

/* What img_chunk_write compresses into: a frame that does not save at least one page
 * on disk (frames are padded to whole pages) is not kept, so a chunk's worth is enough. */
#define IMG_SCRATCH_SIZE IMG_CHUNK

/* A child's chunk stored as the pages it holds, one after another (its page mask says
 * which), so that scattered pages are one write rather than one each, and a codec
 * compresses only them: set in a chunk's codec byte alone (packed, no codec) or with
 * the codec's number. An encoding, not a codec: never named on a command line. */
#define IMG_ENC_PACKED 0x80

/* How chunk c is stored (version 2; a version 1 image reads as all raw). */
struct img_chunk_enc {
	uint8_t codec;        /* enum img_codec: IMG_CODEC_NONE is raw at its fixed place */
	uint16_t data_pages;  /* pages that are not holes, out of 512 */
	uint32_t stored_len;  /* compressed: bytes of the frame at the chunk's place */
	uint64_t stored_hash; /* compressed: XXH3-64 of those bytes */
};

struct img_header_info {
	uint64_t ram_size;    /* multiple of IMG_CHUNK */
	uint32_t policy;      /* recorded, not interpreted */
	uint32_t flags;
	uint64_t created_ns;  /* CLOCK_REALTIME */
	enum img_codec codec; /* what each chunk is compressed with, if it shrinks */
	int level;            /* codec_level_check()ed */
};

struct img_section {
	uint32_t type;
	uint64_t length;
	uint64_t offset;      /* of the payload in the file */
	uint64_t hash;
};

struct img_writer;

/*
 * img_create - start an image for @final_path under a temporary name in the same
 * directory (created exclusively, mode 0600). Nothing appears under the final name
 * until img_finish succeeds.
 */
int img_create(const char *final_path, const struct img_header_info *info, struct img_writer **out);

/* The same in @dir, a directory descriptor the caller opened (img_dir_open) and keeps;
 * @final_path's last component is the name, the whole of it is for messages. Nothing
 * but that name and its temporary is ever looked up, and never through a link. */
int img_create_at(int dir, const char *final_path, const struct img_header_info *info,
		  struct img_writer **out);

/* Open the directory @path's last component is in (O_RDONLY | O_DIRECTORY); *base is
 * that component. A descriptor, or -EISDIR (no name: "", ".", "..", a trailing '/'),
 * or -errno. */
int img_dir_open(const char *path, const char **base);

/* @fd (any descriptor, O_PATH too) opened again as its own open file with @flags,
 * through /proc/self/fd, and checked to be the same file: no name is looked up. A
 * descriptor or -errno. */
#define IMG_PROC_FD_LEN 32
int img_reopen(int fd, int flags);

/* Open @name in @dir for appending, creating it with @mode if it does not exist, but
 * only ever a regular file and never through a link: -EINVAL for anything else. */
int img_append_open(int dir, const char *name, mode_t mode);

/* Whether directory @dir is the directory (@dev, @ino) or beneath it, going up its
 * ".." entries from the descriptor (no path is looked up). */
bool img_dir_beneath(int dir, dev_t dev, ino_t ino);

/* Record page @pfn (guest-physical page number): @data is 4 KiB, or NULL for a zero
 * page (left as a hole). Thread-safe for distinct pages. Returns 0 or -errno. */
int img_write_page(struct img_writer *w, uint64_t pfn, const void *data);

/* Record @n consecutive pages from @pfn, all data (no holes), in one write: what a
 * writer that owns the memory meanwhile (policy stop) uses. Returns 0 or -errno. */
int img_write_pages(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n);

/*
 * A pre-copy (image_pre.c): pages written before the instant, perhaps several times.
 * img_precopy_begin once (-EINVAL for a child, -ENOMEM); img_precopy_pages writes
 * @n pages from @data (bytes that hold still: a copy), from one thread; at the instant,
 * img_precopy_keep for each page whose last pre-copied bytes still stand, which then
 * must not be recorded again (IMG_PAGE_DONE). Every other page is recorded as usual.
 * With a codec, the first pass over memory (round 0, up to img_precopy_first_done) is
 * gathered chunk by chunk and each chunk stored as one frame when that saves a page;
 * what is written into a framed chunk afterwards (later rounds, the pages recorded
 * after the instant) goes to a slot of the patch area, after the memory, one per page
 * (section 12). Other chunks are raw, their pages at their places, zero ones left as
 * holes unless earlier bytes lie there.
 */
int img_precopy_begin(struct img_writer *w);
int img_precopy_pages(struct img_writer *w, uint64_t pfn, const void *data, uint64_t n);
int img_precopy_first_done(struct img_writer *w);
/* In the pause, before any section is streamed: which pages may still need a slot
 * (img_patch_needed: in a framed chunk, without one), and the slots set aside for
 * @n of them, after the memory and what the rounds wrote there. Pages recorded after
 * the instant take their slots from these (streamed sections go after them); past
 * them, -ENOSPC. 0 or -errno. */
bool img_patch_needed(const struct img_writer *w, uint64_t pfn);
int img_precopy_reserve(struct img_writer *w, uint64_t n);
bool img_precopied(const struct img_writer *w, uint64_t pfn);
void img_precopy_keep(struct img_writer *w, uint64_t pfn);

/* A 4 KiB page of zeros (saved as a hole). */
bool img_page_is_zero(const void *p);

/* How the writer hands each page of a chunk to img_chunk_prepare and img_chunk_write. */
enum img_page_what {
	IMG_PAGE_DATA = 0,  /* its contents are in the buffer (all zero: left as a hole) */
	IMG_PAGE_HOLE,      /* a zero page: a hole */
	IMG_PAGE_DONE,      /* recorded already with img_write_page: not touched */
	IMG_PAGE_PARENT,    /* a child does not hold it: its parent's page stands (a
			     * child's chunk is packed: its bytes are never read) */
};

/* Chunk @c is in @data (IMG_CHUNK bytes, page aligned) as @what says per page: add
 * its checksum, turn data pages that are all zero into holes in @what, and set *zero
 * to the holes. Thread-safe for distinct chunks. Returns 0 or -EINVAL. */
int img_chunk_prepare(struct img_writer *w, uint64_t c, const void *data, uint8_t *what,
		      uint64_t *zero);
/* img_chunk_prepare in two steps, for a chunk whose bytes are at hand before the image
 * takes it (held copies compressed under pressure, snapshot/squeeze.c): the digest
 * (@what's all-zero data pages turned into holes, and the checksum's share, returned),
 * computed once from the bytes; then, with @what as the digest left it, added to the
 * image. */
uint64_t img_chunk_digest(uint64_t c, const void *data, uint8_t *what);
int img_chunk_add_digest(struct img_writer *w, uint64_t c, const uint8_t *what, uint64_t h,
			 uint64_t *zero);
/*
 * img_chunk_write - then store it: compressed with the image's codec into @scratch
 * (IMG_SCRATCH_SIZE bytes, page aligned) and written as one frame when that saves at
 * least a page and no page of the chunk is IMG_PAGE_DONE; otherwise its data pages,
 * each run in one write. Holes must read as zero in @data when compressing. O_DIRECT
 * where the file system takes it. Returns 0 or -errno.
 */
int img_chunk_write(struct img_writer *w, uint64_t c, const void *data, const uint8_t *what,
		    void *scratch);

/* Store chunk @c, prepared as its data says, as the @len-byte frame in @frame (room
 * for IMG_CHUNK bytes: it is padded in place): the whole chunk compressed with the
 * image's codec and level, holes as zeros, by someone who held its bytes (held copies
 * compressed under pressure, snapshot/squeeze.c). -EINVAL when that cannot stand for
 * the chunk (a child's image, a page recorded on its own, a frame that saves no page,
 * no codec): store it with img_chunk_write then. */
int img_chunk_write_frame(struct img_writer *w, uint64_t c, uint8_t *frame, uint64_t len,
			  const uint8_t *what);
/* Whether img_chunk_write_frame would take a @len-byte frame for chunk @c: 0 or -EINVAL. */
int img_frame_check(const struct img_writer *w, uint64_t c, uint64_t len, const uint8_t *what);

/* Bytes of data pages recorded so far, and the bytes they take in the image
 * (compressed frames unpadded, raw pages whole). */
void img_writer_bytes(const struct img_writer *w, uint64_t *raw, uint64_t *stored);

/* Chunks holding data so far, by the codec each is stored with (IMG_CODEC_NONE: raw). */
void img_writer_mix(const struct img_writer *w, uint64_t chunks[IMG_CODEC_AUTO]);

/* The rates @w measures and, with --compress auto, chooses codecs by: @a, which the
 * caller keeps from image to image, instead of the writer's own (fresh) ones. */
void img_writer_auto(struct img_writer *w, struct codec_auto *a);

/* A child (info.flags IMG_FLAG_CHILD) names its parent: @recorded as it will be found
 * (a relative path is resolved from the child's directory) and the parent's identity
 * (img_open's r->identity). Returns 0, -EINVAL or -ENOMEM. */
int img_set_parent(struct img_writer *w, const char *recorded, uint64_t identity);

/* Add a section (copied). Returns 0, -E2BIG or -ENOMEM. */
int img_add_section(struct img_writer *w, uint32_t type, const void *data, size_t len);

/*
 * A section too large to hold in memory (a tree's windows), written a record at a time
 * as it comes: into the file, behind the memory, its checksum kept as it goes; or, for
 * a writer of sections only (img_sections_open) with a sink, each record handed to the
 * sink (a migration stream sends it as it comes). One stream at a time; the section
 * joins the table at img_stream_end. A record is @head then @data, either may be empty.
 * 0, -E2BIG past the section's limit, -EBUSY (another stream open), -ENOTSUP (a writer
 * of sections without a sink), -ENOMEM or -EIO.
 */
typedef int img_record_sink(void *ctx, uint32_t type, const void *head, size_t head_len,
			    const void *data, size_t len);
void img_sections_sink(struct img_writer *w, img_record_sink *fn, void *ctx);
int img_stream_begin(struct img_writer *w, uint32_t type);
int img_stream_record(struct img_writer *w, const void *head, size_t head_len,
		      const void *data, size_t len);
int img_stream_end(struct img_writer *w);

/* At img_finish, rename into place only if the final name is still the file (@dev,
 * @ino), else -ESTALE: an image rewritten in place (compact.c) never replaces a newer
 * one that took its name meanwhile. */
void img_replaces(struct img_writer *w, dev_t dev, ino_t ino);

/* Write the chunk checksums, sections and trailer, fsync, rename into place, fsync
 * the directory. Frees @w. On error the temporary file is removed. */
int img_finish(struct img_writer *w);

/* Give up: remove the temporary file and free @w. */
void img_abort(struct img_writer *w);

/* Free @w and close its file, leaving the file as it is: for a process that forked
 * while writing an image, whose child finishes (or abandons) it. */
void img_forget(struct img_writer *w);

/* A writer that only collects sections (for RAM of @ram_size, whose limits they keep),
 * for what sends them elsewhere (a migration stream); img_section_get hands section @i
 * back (0, or -ENOENT past the last); img_forget frees it. */
int img_sections_open(uint64_t ram_size, struct img_writer **out);
int img_section_get(const struct img_writer *w, int i, uint32_t *type, const void **data,
		    size_t *len);

/* Bytes the image occupies on disk (holes excluded) once finished. */
uint64_t img_disk_bytes(const char *path);

struct img_reader {
	int fd;
	uint64_t file_size;
	struct img_header_info info;
	uint32_t version;
	int n_sections;
	struct img_section sec[IMG_MAX_SECTIONS];
	uint64_t *chunk_hash;  /* ram_size / IMG_CHUNK entries */
	struct img_chunk_enc *enc; /* as many */
	enum img_codec codec;  /* what the writer was asked for */
	int level;
	uint64_t n_chunks;
	uint64_t identity;     /* of this image: its header and table checksums */
	/* A child: the parent's identity and path as recorded, its pages, and the parent
	 * (opened with it, and so on up the chain). */
	uint64_t parent_identity;
	char *parent_path;
	uint8_t *mask;
	struct img_reader *parent;
	/* A patched image (section 12): the pages written after their chunk's frame, in
	 * page order, each with the file offset of its 4 KiB; patch_first[c] is chunk c's
	 * first entry (n_chunks + 1 of them). */
	uint64_t n_patches;
	uint64_t *patch_pfn, *patch_off;
	uint32_t *patch_first;
	bool direct;           /* img_reader_direct: memory read through dfd */
	int dfd;
};

/*
 * img_open - open and validate header, trailer and section table (every section's
 * checksum). A child opens its parent with it, and so on up to a full image; each
 * parent must be where the child says and have the identity it recorded. Memory is
 * checked separately. Returns 0, or -EINVAL / -ENOENT / -errno with a message for the
 * user in @err.
 */
int img_open(const char *path, struct img_reader *r, char err[IMG_ERR_LEN]);
void img_close(struct img_reader *r);

/* Read @r's memory with O_DIRECT from now on, where the file system takes it and the
 * buffer is aligned: for a reader that must leave the page cache to others (idle
 * compaction). 0 or -errno (reads stay buffered then). */
int img_reader_direct(struct img_reader *r);

/* img_read_chunk, and for a chunk stored as a frame the frame's bytes as read and
 * checked: *frame (this thread's buffer, until it reads another chunk), or NULL. */
int img_read_chunk_frame(const struct img_reader *r, uint64_t c, void *dst, const void **frame);

/* The section of @type, or NULL. *data is malloc'd; the caller frees it. */
const struct img_section *img_find(const struct img_reader *r, uint32_t type);
int img_read_section(const struct img_reader *r, const struct img_section *s, void **data);
/* @n bytes of section @s from @off into @buf, never the whole section: 0, -EINVAL past
 * its end, -EIO. img_open verified the section; the caller checks what it reads as it
 * would any image bytes (the file may change under it). */
int img_read_at(const struct img_reader *r, const struct img_section *s, uint64_t off,
		void *buf, size_t n);

/*
 * img_read_chunk - read chunk @c of guest memory into @dst (IMG_CHUNK bytes) and
 * check it against its checksum (a compressed chunk: its frame's checksum before
 * decompressing, then the pages'). Of a child, only its own pages (the others read as
 * zero): img_load_chunk gives the chain's. Returns 0, -EBADMSG on a mismatch, or -errno.
 */
int img_read_chunk(const struct img_reader *r, uint64_t c, void *dst);

/*
 * img_load_chunk - bring chunk @c into @dst (IMG_CHUNK bytes), checked against its
 * checksum; of a child, its parent's chunk with the child's pages over it. A chunk that is entirely a hole (all zero) is verified without reading or
 * touching @dst, which must then already read as zero (untouched guest RAM does):
 * *has_data tells which. Returns 0, -EBADMSG on a mismatch, or -errno.
 */
int img_load_chunk(const struct img_reader *r, uint64_t c, void *dst, bool *has_data);

/* Data bytes and stored bytes of the whole image, from its encoding table (and the
 * patch area's pages). */
void img_reader_bytes(const struct img_reader *r, uint64_t *raw, uint64_t *stored);

/* Chunks holding data, by the codec each is stored with (IMG_CODEC_NONE: raw). */
void img_reader_mix(const struct img_reader *r, uint64_t chunks[IMG_CODEC_AUTO]);

#endif
