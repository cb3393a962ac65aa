/*
 * image_read.c - a snapshot image opened and checked: header, trailer, section table,
 * each section's bounds, and a child's chain of parents up to a full image, every file
 * opened once and never through a link (image.c has the layout). Nothing in a file is
 * trusted before it is checked, and no checksum authenticates anything.
 */
#include "image_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* A section may lie over holes of the file up to this much in all (see
 * img_section_holes); a section is verified in pieces of this size. */
#define IMG_SECTION_HOLES_MAX (256ULL << 20)
#define IMG_VERIFY_PIECE      (1U << 20)

static int img_fail(char err[IMG_ERR_LEN], int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int img_fail(char err[IMG_ERR_LEN], int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, IMG_ERR_LEN, fmt, ap);
	va_end(ap);
	return rc;
}

static int img_check_header(struct img_reader *r, char err[IMG_ERR_LEN])
{
	uint8_t hdr[IMG_HDR_SIZE];

	if (r->file_size < IMG_HDR_SIZE || img_pread_all(r->fd, hdr, sizeof(hdr), 0))
		return img_fail(err, -EINVAL, "not a ccvm snapshot image (%llu bytes, too short "
				"for a header)", (unsigned long long)r->file_size);
	if (memcmp(hdr, IMG_MAGIC, 8) != 0)
		return img_fail(err, -EINVAL, "not a ccvm snapshot image (no CCVMIMG magic)");
	r->version = img_get32(hdr + 8);
	if (r->version < IMG_VERSION_OLDEST || r->version > IMG_VERSION)
		return img_fail(err, -EINVAL, "image format version %u; this ccvm reads versions "
				"%u to %u", r->version, IMG_VERSION_OLDEST, IMG_VERSION);
	if (img_get64(hdr + 56) != XXH3_64bits(hdr, 56))
		return img_fail(err, -EINVAL, "the image header fails its checksum (damaged)");
	r->info.ram_size = img_get64(hdr + 16);
	r->info.policy = img_get32(hdr + 24);
	r->info.flags = img_get32(hdr + 28);
	r->info.created_ns = img_get64(hdr + 32);
	r->identity = img_get64(hdr + 56); /* with the trailer's checksum, once checked */
	if ((r->info.flags & ~IMG_FLAGS_KNOWN) || (r->info.flags && r->version < 2))
		return img_fail(err, -EINVAL, "the image has flags %#x this ccvm does not know "
				"(written by a newer ccvm?)", r->info.flags);
	if (r->info.ram_size > IMG_MAX_RAM)
		return img_fail(err, -EINVAL, "the image header claims %llu MiB of RAM, more than "
				"the largest VM (%llu MiB)",
				(unsigned long long)(r->info.ram_size >> 20),
				(unsigned long long)(IMG_MAX_RAM >> 20));
	if (img_get32(hdr + 12) != PAGE_SIZE || img_get64(hdr + 40) != IMG_MEM_OFFSET ||
	    img_get64(hdr + 48) != IMG_CHUNK || !r->info.ram_size || r->info.ram_size % IMG_CHUNK)
		return img_fail(err, -EINVAL, "the image header has impossible values (page %u, "
				"RAM %llu bytes)", img_get32(hdr + 12),
				(unsigned long long)r->info.ram_size);
	return 0;
}

/* Bytes of holes in @s's range of the file, up to just over IMG_SECTION_HOLES_MAX
 * (the walk stops there). A writer writes every byte of a section, so a crafted file
 * is what has large ones; a file system that stores zero blocks as holes (ZFS or btrfs
 * with compression) makes small ones, which the bound leaves room for. Where the file
 * system cannot tell (no SEEK_DATA), there are none. */
static uint64_t img_section_holes(int fd, const struct img_section *s)
{
	uint64_t at = s->offset, end = s->offset + s->length, holes = 0;

	while (at < end && holes <= IMG_SECTION_HOLES_MAX) {
		off_t data = lseek(fd, (off_t)at, SEEK_DATA), hole;

		if (data < 0)
			return errno == ENXIO ? holes + (end - at) : holes;
		if ((uint64_t)data >= end)
			return holes + (end - at);
		holes += (uint64_t)data - at;
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			return holes;
		at = (uint64_t)hole;
	}
	return holes;
}

int img_read_at(const struct img_reader *r, const struct img_section *s, uint64_t off,
		void *buf, size_t n)
{
	if (off > s->length || n > s->length - off)
		return -EINVAL;
	return img_pread_all(r->fd, buf, n, s->offset + off) ? -EIO : 0;
}

/* Check @s's checksum reading it a piece at a time: a section this reader does not
 * keep is never in memory whole, however long the file says it is. */
static int img_section_verify(const struct img_reader *r, const struct img_section *s)
{
	XXH3_state_t *st = XXH3_createState();
	uint8_t *buf = malloc(IMG_VERIFY_PIECE);
	int rc = st && buf ? 0 : -ENOMEM;

	if (!rc && XXH3_64bits_reset(st) != XXH_OK)
		rc = -ENOMEM;
	for (uint64_t at = 0; !rc && at < s->length; at += IMG_VERIFY_PIECE) {
		size_t n = s->length - at < IMG_VERIFY_PIECE ? (size_t)(s->length - at) :
							       IMG_VERIFY_PIECE;

		rc = img_pread_all(r->fd, buf, n, s->offset + at);
		if (!rc && XXH3_64bits_update(st, buf, n) != XXH_OK)
			rc = -ENOMEM;
	}
	if (!rc && XXH3_64bits_digest(st) != s->hash)
		rc = -EBADMSG;
	free(buf);
	XXH3_freeState(st);
	return rc;
}

static int img_check_trailer(struct img_reader *r, char err[IMG_ERR_LEN], uint64_t *table_off)
{
	uint8_t trailer[IMG_TRAILER], table[IMG_MAX_SECTIONS * IMG_TABLE_ENT];
	uint64_t min = IMG_MEM_OFFSET + r->info.ram_size;
	uint64_t h;
	int rc;

	if (r->file_size < min + IMG_TRAILER ||
	    img_pread_all(r->fd, trailer, sizeof(trailer), r->file_size - IMG_TRAILER) ||
	    memcmp(trailer, IMG_END_MAGIC, 8) != 0)
		return img_fail(err, -EINVAL, "truncated or incomplete image: no valid trailer at "
				"the end (%llu bytes; memory alone needs %llu)",
				(unsigned long long)r->file_size, (unsigned long long)min);
	*table_off = img_get64(trailer + 8);
	r->n_sections = (int)img_get32(trailer + 16);
	if (img_get64(trailer + 24) != r->file_size || img_get64(trailer + 32) != r->info.ram_size ||
	    r->n_sections < 1 || r->n_sections > IMG_MAX_SECTIONS || *table_off < min ||
	    *table_off + (uint64_t)r->n_sections * IMG_TABLE_ENT + IMG_TRAILER != r->file_size)
		return img_fail(err, -EINVAL, "the image trailer does not match the file (size %llu, "
				"trailer says %llu): truncated or damaged",
				(unsigned long long)r->file_size,
				(unsigned long long)img_get64(trailer + 24));
	if (img_pread_all(r->fd, table, (size_t)r->n_sections * IMG_TABLE_ENT, *table_off))
		return img_fail(err, -EIO, "cannot read the section table");
	rc = img_table_hash(table, r->n_sections, trailer, &h);
	if (rc)
		return rc;
	if (h != img_get64(trailer + 40))
		return img_fail(err, -EINVAL, "the section table or trailer fails its checksum");
	/* The table holds every section's checksum, the chunk checksums' among them. */
	r->identity = XXH3_64bits_withSeed(trailer + 40, 8, r->identity);
	for (int i = 0; i < r->n_sections; i++) {
		const uint8_t *e = table + i * IMG_TABLE_ENT;

		r->sec[i].type = img_get32(e);
		r->sec[i].offset = img_get64(e + 8);
		r->sec[i].length = img_get64(e + 16);
		r->sec[i].hash = img_get64(e + 24);
		if (r->sec[i].offset < min || r->sec[i].offset > *table_off ||
		    r->sec[i].length > *table_off - r->sec[i].offset)
			return img_fail(err, -EINVAL, "section %d lies outside its area", i);
		if (r->sec[i].length > img_section_max(r->sec[i].type, r->info.ram_size))
			return img_fail(err, -EINVAL, "section %d (type %u) is %llu bytes, longer "
					"than that kind may be (%llu)", i, r->sec[i].type,
					(unsigned long long)r->sec[i].length,
					(unsigned long long)img_section_max(r->sec[i].type,
									    r->info.ram_size));
		if (img_section_holes(r->fd, &r->sec[i]) > IMG_SECTION_HOLES_MAX)
			return img_fail(err, -EINVAL, "section %d (type %u) claims %llu bytes, but "
					"the file holds no data for most of them (a sparse file, "
					"not an image ccvm wrote)", i, r->sec[i].type,
					(unsigned long long)r->sec[i].length);
	}
	return 0;
}

int img_read_section(const struct img_reader *r, const struct img_section *s, void **data)
{
	void *buf = malloc(s->length ? s->length : 1);
	int rc;

	if (!buf)
		return -ENOMEM;
	rc = img_pread_all(r->fd, buf, s->length, s->offset);
	if (!rc && XXH3_64bits(buf, s->length) != s->hash)
		rc = -EBADMSG;
	if (rc) {
		free(buf);
		return rc;
	}
	*data = buf;
	return 0;
}

const struct img_section *img_find(const struct img_reader *r, uint32_t type)
{
	for (int i = 0; i < r->n_sections; i++)
		if (r->sec[i].type == type)
			return &r->sec[i];
	return NULL;
}

/* One chunk's encoding from entry @e; false when no writer could have made it. */
static bool img_enc_decode(const uint8_t *e, bool child, bool patched, struct img_chunk_enc *out)
{
	out->codec = e[0];
	out->data_pages = (uint16_t)(e[2] | e[3] << 8);
	out->stored_len = img_get32(e + 4);
	out->stored_hash = img_get64(e + 8);
	if (e[1] || out->data_pages > IMG_PAGES_PER_CHUNK ||
	    (out->codec & ~IMG_ENC_PACKED) >= IMG_CODEC_AUTO ||
	    ((out->codec & IMG_ENC_PACKED) && !child))
		return false;
	if (out->codec == IMG_CODEC_NONE)
		return out->stored_len == 0 && out->stored_hash == 0;
	if (out->codec == IMG_ENC_PACKED && out->stored_len % PAGE_SIZE)
		return false;
	/* A frame is kept only when it saves a page, so it is never a whole chunk; in a
	 * patched image its pages may all have been zeroed since. */
	return out->stored_len > 0 && out->stored_len <= IMG_CHUNK - PAGE_SIZE &&
	       (out->data_pages > 0 || patched);
}

/* Version 2's encoding section (@payload, already checked against its checksum);
 * version 1 has none and every chunk is raw. */
static int img_parse_encoding(struct img_reader *r, const uint8_t *payload,
			      char err[IMG_ERR_LEN])
{
	const struct img_section *s = img_find(r, IMG_SEC_ENCODING);

	r->enc = calloc(r->n_chunks ? r->n_chunks : 1, sizeof(*r->enc));
	if (!r->enc)
		return -ENOMEM;
	if (r->version == 1)
		return 0;
	if (!s || !payload || s->length != IMG_ENC_HEAD + r->n_chunks * IMG_ENC_ENT)
		return img_fail(err, -EINVAL, "the chunk encoding table is missing or has the "
				"wrong size");
	r->codec = (enum img_codec)img_get32(payload);
	r->level = (int)img_get32(payload + 4);
	if (r->codec >= IMG_CODEC_NR)
		return img_fail(err, -EINVAL, "the image names an unknown codec (%u)", r->codec);
	for (uint64_t c = 0; c < r->n_chunks; c++)
		if (!img_enc_decode(payload + IMG_ENC_HEAD + c * IMG_ENC_ENT,
				    r->info.flags & IMG_FLAG_CHILD,
				    r->info.flags & IMG_FLAG_PATCHED, &r->enc[c]))
			return img_fail(err, -EINVAL, "memory chunk %llu has an impossible encoding "
					"(damaged)", (unsigned long long)c);
	return 0;
}

/* A child's parent section (@parent: identity, then the path, no NUL) and page mask
 * (@mask, taken over); nothing for a full image. */
static int img_parse_lineage(struct img_reader *r, const uint8_t *parent, uint8_t **mask,
			     char err[IMG_ERR_LEN])
{
	const struct img_section *sp = img_find(r, IMG_SEC_PARENT), *sm = img_find(r, IMG_SEC_PAGEMASK);
	uint64_t plen;

	if (!(r->info.flags & IMG_FLAG_CHILD))
		return sp || sm ? img_fail(err, -EINVAL, "a full image with a parent section") : 0;
	if (!sp || !parent || !sm || !*mask || sm->length != r->info.ram_size / PAGE_SIZE / 8)
		return img_fail(err, -EINVAL, "an incremental image without its parent or page "
				"mask section");
	plen = sp->length - 8;
	if (sp->length <= 8 || plen >= IMG_PATH_MAX || memchr(parent + 8, 0, plen))
		return img_fail(err, -EINVAL, "the parent's path is empty, too long or holds a NUL");
	r->parent_identity = img_get64(parent);
	r->parent_path = strndup((const char *)parent + 8, plen);
	if (!r->parent_path)
		return -ENOMEM;
	r->mask = *mask;
	*mask = NULL;
	return 0;
}

/* One patch entry: its page, in a framed chunk, after the last entry's; its 4 KiB
 * between the memory's end and the section table. */
static bool img_patch_ok(const struct img_reader *r, uint64_t pfn, uint64_t off, uint64_t prev,
			 uint64_t table_off)
{
	uint64_t c = pfn / IMG_PAGES_PER_CHUNK;

	return pfn < r->info.ram_size / PAGE_SIZE && (prev == UINT64_MAX || pfn > prev) &&
	       r->enc[c].codec != IMG_CODEC_NONE && !(r->enc[c].codec & IMG_ENC_PACKED) &&
	       off >= IMG_MEM_OFFSET + r->info.ram_size && off <= table_off &&
	       table_off - off >= PAGE_SIZE;
}

/* The patches section (@b, checked against its checksum), which a patched image, and
 * only one, has: its entries and each chunk's first. */
static int img_parse_patches(struct img_reader *r, const uint8_t *b, uint64_t table_off,
			     char err[IMG_ERR_LEN])
{
	const struct img_section *s = img_find(r, IMG_SEC_PATCHES);
	uint64_t n, prev = UINT64_MAX;

	if (!(r->info.flags & IMG_FLAG_PATCHED))
		return s ? img_fail(err, -EINVAL, "an image with a patches section but not the "
				    "flag that says so") : 0;
	if (!s || !b || s->length < IMG_PATCH_HEAD)
		return img_fail(err, -EINVAL, "a patched image without its patches section");
	n = img_get64(b);
	if (img_get64(b + 8) || n > r->info.ram_size / PAGE_SIZE ||
	    s->length != IMG_PATCH_HEAD + n * IMG_PATCH_ENT)
		return img_fail(err, -EINVAL, "the patches section has the wrong size");
	r->patch_pfn = malloc((n ? n : 1) * sizeof(uint64_t));
	r->patch_off = malloc((n ? n : 1) * sizeof(uint64_t));
	r->patch_first = calloc(r->n_chunks + 1, sizeof(uint32_t));
	if (!r->patch_pfn || !r->patch_off || !r->patch_first)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *e = b + IMG_PATCH_HEAD + i * IMG_PATCH_ENT;

		r->patch_pfn[i] = img_get64(e);
		r->patch_off[i] = img_get64(e + 8);
		if (!img_patch_ok(r, r->patch_pfn[i], r->patch_off[i], prev, table_off))
			return img_fail(err, -EINVAL, "patch %llu is impossible (damaged)",
					(unsigned long long)i);
		prev = r->patch_pfn[i];
	}
	r->n_patches = n;
	for (uint64_t c = 0, i = 0; c <= r->n_chunks; c++) {
		while (i < n && r->patch_pfn[i] / IMG_PAGES_PER_CHUNK < c)
			i++;
		r->patch_first[c] = (uint32_t)i;
	}
	return 0;
}

static int img_check_sections(struct img_reader *r, uint64_t table_off, char err[IMG_ERR_LEN])
{
	const struct img_section *chunks;
	uint8_t *encoding = NULL, *parent = NULL, *mask = NULL, *patches = NULL;
	void *data;
	int rc;

	for (int i = 0; i < r->n_sections; i++) {
		uint32_t t = r->sec[i].type;
		bool keep = t == IMG_SEC_CHUNKS || t == IMG_SEC_ENCODING || t == IMG_SEC_PARENT ||
			    t == IMG_SEC_PAGEMASK || t == IMG_SEC_PATCHES;

		data = NULL;
		rc = keep ? img_read_section(r, &r->sec[i], &data) : img_section_verify(r, &r->sec[i]);
		if (rc) {
			rc = img_fail(err, -EINVAL, "section %d (type %u, %llu bytes) %s", i,
				      r->sec[i].type, (unsigned long long)r->sec[i].length,
				      rc == -EBADMSG ? "fails its checksum (damaged)" :
						       "cannot be read");
			goto out; /* (the sections kept so far are freed there) */
		}
		if (r->sec[i].type == IMG_SEC_CHUNKS && !r->chunk_hash)
			r->chunk_hash = data;
		else if (r->sec[i].type == IMG_SEC_ENCODING && !encoding)
			encoding = data;
		else if (r->sec[i].type == IMG_SEC_PARENT && !parent)
			parent = data;
		else if (r->sec[i].type == IMG_SEC_PAGEMASK && !mask)
			mask = data;
		else if (r->sec[i].type == IMG_SEC_PATCHES && !patches)
			patches = data;
		else
			free(data); /* NULL for one only verified */
	}
	chunks = img_find(r, IMG_SEC_CHUNKS);
	r->n_chunks = r->info.ram_size / IMG_CHUNK;
	if (!chunks || chunks->length != r->n_chunks * sizeof(uint64_t))
		rc = img_fail(err, -EINVAL, "the memory checksum table is missing or has the "
			      "wrong size");
	else
		rc = img_parse_encoding(r, encoding, err);
	if (!rc)
		rc = img_parse_lineage(r, parent, &mask, err);
	if (!rc)
		rc = img_parse_patches(r, patches, table_off, err);
out:
	free(encoding);
	free(parent);
	free(mask);
	free(patches);
	return rc;
}

/* Where a child's parent is: its recorded path, from the child's directory when
 * relative. NULL when out of memory. */
static char *img_parent_location(const char *child, const char *recorded)
{
	char *dup, *out = NULL;

	if (recorded[0] == '/')
		return strdup(recorded);
	dup = strdup(child);
	if (dup && asprintf(&out, "%s/%s", dirname(dup), recorded) < 0)
		out = NULL;
	free(dup);
	return out;
}

static int img_open_at(int at, const char *path, bool parent, struct img_reader *r,
		       char err[IMG_ERR_LEN], int depth);

/* Open a child's parent (and so its ancestors) and check it is the image the child
 * was taken after: the same RAM size and the identity recorded. A relative name is
 * looked up in @dir, the directory the child was opened in. */
static int img_open_parent(int dir, const char *path, struct img_reader *r,
			   char err[IMG_ERR_LEN], int depth)
{
	char *where = img_parent_location(path, r->parent_path), why[IMG_ERR_LEN];
	int rc;

	if (!where)
		return -ENOMEM;
	if (depth + 1 >= IMG_MAX_CHAIN) {
		rc = img_fail(err, -ELOOP, "its chain of parents is longer than %d images (a loop?)",
			      IMG_MAX_CHAIN);
		goto out;
	}
	r->parent = calloc(1, sizeof(*r->parent));
	if (!r->parent) {
		rc = -ENOMEM;
		goto out;
	}
	rc = img_open_at(dir, r->parent_path, true, r->parent, why, depth + 1);
	if (rc) {
		free(r->parent);
		r->parent = NULL;
		img_fail(err, rc, "its parent %s %s: %s", where,
			 rc == -ENOENT ? "is missing" : "cannot be used", why);
		goto out;
	}
	if (r->parent->identity != r->parent_identity || r->parent->info.ram_size != r->info.ram_size)
		rc = img_fail(err, -EINVAL, "its parent %s is not the image it was taken after (it "
			      "was replaced or changed since)", where);
out:
	free(where);
	return rc;
}

int img_open(const char *path, struct img_reader *r, char err[IMG_ERR_LEN])
{
	return img_open_at(AT_FDCWD, path, false, r, err, 0);
}

/* Why @st cannot be an image, or NULL when it is a regular file. */
static const char *img_not_regular(const struct stat *st)
{
	if (S_ISREG(st->st_mode))
		return NULL;
	return S_ISLNK(st->st_mode) ? "a symbolic link, which an image's parent may not be" :
				      "not a regular file";
}

/*
 * Open @base in @dir for reading without acting on whatever else it names. Its type is
 * read first without opening anything; a regular file is then looked up once as an
 * O_PATH descriptor (which opens no device or FIFO), checked to be that same file,
 * and reopened through that descriptor, so the file read is the file checked. A
 * parent, which an image names, may not be a symbolic link either.
 */
static int img_open_file(int dir, const char *base, bool parent, char err[IMG_ERR_LEN])
{
	struct stat pre, st = { 0 };
	const char *why;
	int pfd, fd;

	if (fstatat(dir, base, &pre, parent ? AT_SYMLINK_NOFOLLOW : 0) < 0)
		return img_fail(err, -errno, "cannot open: %s", strerror(errno));
	why = img_not_regular(&pre);
	if (why)
		return img_fail(err, -EINVAL, "%s", why);
	pfd = openat(dir, base, O_PATH | O_CLOEXEC | (parent ? O_NOFOLLOW : 0));
	if (pfd < 0)
		return img_fail(err, -errno, "cannot open: %s", strerror(errno));
	if (fstat(pfd, &st) < 0 || (why = img_not_regular(&st)) || st.st_dev != pre.st_dev ||
	    st.st_ino != pre.st_ino) {
		fd = img_fail(err, -EINVAL, "%s", why ? why : "replaced while it was opened");
	} else {
		fd = img_reopen(pfd, O_RDONLY | O_NOCTTY);
		if (fd < 0)
			img_fail(err, fd, "cannot reopen it through /proc/self/fd: %s", strerror(-fd));
	}
	close(pfd);
	return fd;
}

static int img_open_at(int at, const char *path, bool parent, struct img_reader *r,
		       char err[IMG_ERR_LEN], int depth)
{
	const char *base;
	struct stat st;
	uint64_t table_off = 0;
	int dir, rc;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	dir = img_dir_at(at, path, O_PATH, &base);
	if (dir < 0)
		return img_fail(err, dir, "cannot open its directory: %s", strerror(-dir));
	r->fd = img_open_file(dir, base, parent, err);
	if (r->fd < 0) {
		rc = r->fd;
		goto fail;
	}
	if (fstat(r->fd, &st) < 0) {
		rc = img_fail(err, -errno, "fstat: %s", strerror(errno));
		goto fail;
	}
	r->file_size = (uint64_t)st.st_size;
	rc = img_check_header(r, err);
	if (!rc)
		rc = img_check_trailer(r, err, &table_off);
	if (!rc)
		rc = img_check_sections(r, table_off, err);
	if (!rc && r->parent_path)
		rc = img_open_parent(dir, path, r, err, depth);
	if (!rc) {
		close(dir);
		return 0;
	}
fail:
	close(dir);
	img_close(r);
	return rc;
}

void img_close(struct img_reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->chunk_hash);
	free(r->enc);
	free(r->parent_path);
	free(r->mask);
	free(r->patch_pfn);
	free(r->patch_off);
	free(r->patch_first);
	if (r->direct)
		close(r->dfd);
	r->direct = false;
	r->patch_pfn = r->patch_off = NULL;
	r->patch_first = NULL;
	r->n_patches = 0;
	if (r->parent) {
		img_close(r->parent);
		free(r->parent);
	}
	r->chunk_hash = NULL;
	r->enc = NULL;
	r->parent_path = NULL;
	r->mask = NULL;
	r->parent = NULL;
	r->fd = -1;
}

int img_reader_direct(struct img_reader *r)
{
	int fd;

	if (r->direct)
		return 0;
	fd = img_reopen(r->fd, O_RDONLY | O_DIRECT);
	if (fd < 0)
		return fd;
	r->dfd = fd;
	r->direct = true;
	return 0;
}

void img_reader_bytes(const struct img_reader *r, uint64_t *raw, uint64_t *stored)
{
	*raw = *stored = 0;
	for (uint64_t c = 0; c < r->n_chunks; c++) {
		*raw += (uint64_t)r->enc[c].data_pages * PAGE_SIZE;
		*stored += r->enc[c].codec == IMG_CODEC_NONE ?
				   (uint64_t)r->enc[c].data_pages * PAGE_SIZE : r->enc[c].stored_len;
	}
	*stored += r->n_patches * PAGE_SIZE;
}

void img_reader_mix(const struct img_reader *r, uint64_t chunks[IMG_CODEC_AUTO])
{
	memset(chunks, 0, IMG_CODEC_AUTO * sizeof(chunks[0]));
	for (uint64_t c = 0; c < r->n_chunks; c++)
		if (r->enc[c].data_pages)
			chunks[(r->enc[c].codec & ~IMG_ENC_PACKED) % IMG_CODEC_AUTO]++;
}
