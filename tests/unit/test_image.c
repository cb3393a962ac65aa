/*
 * test_image.c - snapshot images: what is written reads back; any damage is refused
 * with a message that says what is wrong; nothing half-written appears under the name.
 */
#include "suites.h"
#include "../../snapshot/codec.h"
#include "../../snapshot/image.h"
#include "../../snapshot/merge.h"
#include "../../snapshot/compact.h"
#include "../../snapshot/compactor.h"
#include "../../base/mono.h"
#include "../../vmm/persist_restore.h"
#include "../../mmu/layout.h"

#include <xxhash.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/sysmacros.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RAM (4ULL << 20)
#define PAGES (RAM / PAGE_SIZE)

static char dir[64], path[128];
static uint8_t *mem;

static void setup(void)
{
	strcpy(dir, "/tmp/ccvm-img-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/snap.img", dir);
	mem = calloc(1, RAM);
	for (uint64_t p = 0; p < PAGES; p += 3)
		memset(mem + p * PAGE_SIZE, (int)(p & 0xff) | 1, PAGE_SIZE);
}

static void teardown(void)
{
	char cmd[128];

	free(mem);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static bool page_zero(const uint8_t *p)
{
	for (size_t i = 0; i < PAGE_SIZE; i++)
		if (p[i])
			return false;
	return true;
}

/* Write every page (backwards, to show order does not matter), plus two sections. */
static void write_image(void)
{
	struct img_header_info info = { .ram_size = RAM, .policy = 1, .created_ns = 123 };
	struct img_writer *w;

	ck_assert_int_eq(img_create(path, &info, &w), 0);
	for (uint64_t p = PAGES; p-- > 0;) {
		const uint8_t *d = mem + p * PAGE_SIZE;

		ck_assert_int_eq(img_write_page(w, p, page_zero(d) ? NULL : d), 0);
	}
	ck_assert_int_eq(img_add_section(w, IMG_SEC_VCPUS, "vcpu-state", 10), 0);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_PROCESS, "{\"a\":1}", 7), 0);
	ck_assert_int_eq(img_finish(w), 0);
}

static void flip_byte_of(const char *file, uint64_t off)
{
	int fd = open(file, O_RDWR);
	uint8_t b;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

static void flip_byte(uint64_t off)
{
	flip_byte_of(path, off);
}

static void expect_open_fails(const char *needle)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];

	ck_assert_msg(img_open(path, &r, err) != 0, "damaged image accepted");
	ck_assert_msg(strstr(err, needle), "error '%s' lacks '%s'", err, needle);
}

/* The image at @file opens intact and every chunk equals @want. */
static void expect_image_is_mem_at(const char *file, const uint8_t *want)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];
	uint8_t *chunk = malloc(IMG_CHUNK);

	ck_assert_ptr_nonnull(chunk);
	ck_assert_msg(img_open(file, &r, err) == 0, "%s", err);
	for (uint64_t c = 0; c < r.n_chunks; c++) {
		ck_assert_int_eq(img_read_chunk(&r, c, chunk), 0);
		ck_assert_msg(memcmp(chunk, want + c * IMG_CHUNK, IMG_CHUNK) == 0, "chunk %llu differs",
			      (unsigned long long)c);
	}
	img_close(&r);
	free(chunk);
}

/* The image at path opens intact and every chunk equals mem. */
static void expect_image_is_mem(void)
{
	expect_image_is_mem_at(path, mem);
}

static int entries_in_dir(void)
{
	char cmd[128];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l", dir);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

/* The temporary of writer @pid in dir (".snap.img.tmp.PID.RANDOM") into @out; false
 * when there is none. */
static bool find_temporary(pid_t pid, char *out, size_t len)
{
	char prefix[64];
	struct dirent *de;
	DIR *d = opendir(dir);
	bool found = false;

	ck_assert_ptr_nonnull(d);
	snprintf(prefix, sizeof(prefix), ".snap.img.tmp.%d.", (int)pid);
	while (!found && (de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix))) {
			snprintf(out, len, "%s/%.180s", dir, de->d_name);
			found = true;
		}
	closedir(d);
	return found;
}

/* Everything written reads back: header, sections, every chunk with its checksum. */
START_TEST(test_round_trip)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];
	uint8_t *chunk = malloc(IMG_CHUNK);
	void *data;

	write_image();
	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
	ck_assert_uint_eq(r.info.ram_size, RAM);
	ck_assert_uint_eq(r.info.policy, 1);
	ck_assert_uint_eq(r.info.created_ns, 123);
	ck_assert_int_eq(img_read_section(&r, img_find(&r, IMG_SEC_VCPUS), &data), 0);
	ck_assert_int_eq(memcmp(data, "vcpu-state", 10), 0);
	free(data);
	for (uint64_t c = 0; c < r.n_chunks; c++) {
		ck_assert_int_eq(img_read_chunk(&r, c, chunk), 0);
		ck_assert_int_eq(memcmp(chunk, mem + c * IMG_CHUNK, IMG_CHUNK), 0);
	}
	img_close(&r);
	/* Zero pages are holes: the file takes less than the RAM it describes. */
	ck_assert_uint_lt(img_disk_bytes(path), RAM);
	free(chunk);
}
END_TEST

/* A section streamed a record at a time lands in the file behind the memory, before
 * the sections held in memory: each reads back whole, its checksum right; one flipped
 * byte in it is caught; a second stream waits for the first, and an image with a
 * stream left open is never finished. */
#define STREAM_REC 4096
START_TEST(test_streamed_section)
{
	struct img_header_info info = { .ram_size = RAM, .policy = 1 };
	struct img_reader r;
	struct img_writer *w;
	char err[IMG_ERR_LEN];
	uint8_t rec[STREAM_REC], *data;
	uint32_t head[2];
	void *v;

	ck_assert_int_eq(img_create(path, &info, &w), 0);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_VCPUS, "vcpu-state", 10), 0);
	ck_assert_int_eq(img_stream_record(w, "x", 1, NULL, 0), -EINVAL); /* none open */
	ck_assert_int_eq(img_stream_begin(w, IMG_SEC_WINDOWS), 0);
	ck_assert_int_eq(img_stream_begin(w, IMG_SEC_SHM), -EBUSY);
	for (uint32_t i = 0; i < 5; i++) {
		head[0] = i;
		head[1] = 7 * i;
		memset(rec, (int)i + 1, sizeof(rec));
		ck_assert_int_eq(img_stream_record(w, head, sizeof(head), rec, sizeof(rec)), 0);
	}
	ck_assert_int_eq(img_stream_end(w), 0);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_PROCESS, "{\"a\":1}", 7), 0);
	ck_assert_int_eq(img_finish(w), 0);

	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
	ck_assert_ptr_nonnull(img_find(&r, IMG_SEC_WINDOWS));
	ck_assert_uint_eq(img_find(&r, IMG_SEC_WINDOWS)->length, 5 * (8 + STREAM_REC));
	ck_assert_int_eq(img_read_section(&r, img_find(&r, IMG_SEC_WINDOWS), &v), 0);
	data = v;
	for (uint32_t i = 0; i < 5; i++) {
		memcpy(head, data + i * (8 + STREAM_REC), 8);
		ck_assert_uint_eq(head[0], i);
		ck_assert_uint_eq(head[1], 7 * i);
		ck_assert_uint_eq(data[i * (8 + STREAM_REC) + 8 + STREAM_REC - 1], i + 1);
	}
	free(v);
	ck_assert_int_eq(img_read_section(&r, img_find(&r, IMG_SEC_PROCESS), &v), 0);
	ck_assert_int_eq(memcmp(v, "{\"a\":1}", 7), 0);
	free(v);
	/* The streamed bytes sit right behind the memory. */
	ck_assert_uint_eq(img_find(&r, IMG_SEC_WINDOWS)->offset, IMG_MEM_OFFSET + RAM);
	img_close(&r);
	flip_byte(IMG_MEM_OFFSET + RAM + 2 * (8 + STREAM_REC) + 100);
	expect_open_fails("fails its checksum");

	ck_assert_int_eq(img_create(path, &info, &w), 0);
	ck_assert_int_eq(img_stream_begin(w, IMG_SEC_WINDOWS), 0);
	ck_assert_int_ne(img_finish(w), 0); /* a section half written */
}
END_TEST

/* An open stream keeps its place in the table: sections added meanwhile stop short
 * of it, and the image still finishes with every section it needs. */
START_TEST(test_streamed_place_kept)
{
	struct img_header_info info = { .ram_size = RAM, .policy = 1 };
	struct img_reader r;
	struct img_writer *w;
	char err[IMG_ERR_LEN];
	int added = 0;

	ck_assert_int_eq(img_create(path, &info, &w), 0);
	ck_assert_int_eq(img_stream_begin(w, IMG_SEC_WINDOWS), 0);
	while (img_add_section(w, IMG_SEC_INFO, "{}", 2) == 0)
		added++;
	/* The stream's place and the four finishing may add (a child's too) stay free. */
	ck_assert_int_eq(added, IMG_MAX_SECTIONS - 4 - 1);
	ck_assert_int_eq(img_stream_record(w, "12345678", 8, mem, 4096), 0);
	ck_assert_int_eq(img_stream_end(w), 0);
	ck_assert_int_eq(img_finish(w), 0);
	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
	ck_assert_int_eq(r.n_sections, added + 1 + 2); /* and checksums, encodings */
	ck_assert_ptr_nonnull(img_find(&r, IMG_SEC_WINDOWS));
	img_close(&r);
}
END_TEST

/* A writer of sections only hands each streamed record to its sink, as it comes, and
 * refuses a stream without one; a record past the section's limit is refused. */
struct sink_seen {
	int records;
	size_t bytes;
	uint32_t type;
};

static int sink_count(void *ctx, uint32_t type, const void *head, size_t head_len,
		      const void *data, size_t len)
{
	struct sink_seen *k = ctx;

	(void)head;
	(void)data;
	k->records++;
	k->bytes += head_len + len;
	k->type = type;
	return 0;
}

START_TEST(test_streamed_sink)
{
	struct sink_seen seen = { 0 };
	struct img_writer *w;
	uint8_t rec[STREAM_REC] = { 1 };
	const void *d;
	uint32_t type;
	size_t len;

	ck_assert_int_eq(img_sections_open(RAM, &w), 0);
	ck_assert_int_eq(img_stream_begin(w, IMG_SEC_WINDOWS), -ENOTSUP);
	img_sections_sink(w, sink_count, &seen);
	ck_assert_int_eq(img_stream_begin(w, IMG_SEC_WINDOWS), 0);
	ck_assert_int_eq(img_stream_record(w, "12345678", 8, rec, sizeof(rec)), 0);
	ck_assert_int_eq(img_stream_record(w, "12345678", 8, rec, sizeof(rec)), 0);
	ck_assert_int_eq(img_stream_end(w), 0);
	ck_assert_int_eq(seen.records, 2);
	ck_assert_uint_eq(seen.bytes, 2 * (8 + STREAM_REC));
	ck_assert_uint_eq(seen.type, IMG_SEC_WINDOWS);
	ck_assert_int_eq(img_section_get(w, 0, &type, &d, &len), -ENOENT); /* none kept */
	/* The shared memory section is bounded at 4x the RAM. */
	ck_assert_int_eq(img_stream_begin(w, IMG_SEC_SHM), 0);
	ck_assert_int_eq(img_stream_record(w, NULL, 0, mem, RAM), 0);
	ck_assert_int_eq(img_stream_record(w, NULL, 0, mem, RAM), 0);
	ck_assert_int_eq(img_stream_record(w, NULL, 0, mem, RAM), 0);
	ck_assert_int_eq(img_stream_record(w, NULL, 0, mem, RAM), 0);
	ck_assert_int_eq(img_stream_record(w, "x", 1, NULL, 0), -E2BIG);
	img_forget(w);
}
END_TEST

/* One flipped bit in memory is caught by that chunk's checksum, and only that chunk. */
START_TEST(test_memory_damage)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];
	uint8_t *chunk = malloc(IMG_CHUNK);

	write_image();
	flip_byte(IMG_MEM_OFFSET + IMG_CHUNK + 5 * PAGE_SIZE + 17);
	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
	ck_assert_int_eq(img_read_chunk(&r, 0, chunk), 0);
	ck_assert_int_eq(img_read_chunk(&r, 1, chunk), -EBADMSG);
	img_close(&r);
	free(chunk);
}
END_TEST

/* Damage in the header, a section, the table or the trailer fails at open. */
START_TEST(test_metadata_damage)
{
	struct stat st;

	write_image();
	flip_byte(20);
	expect_open_fails("header");
	write_image();
	flip_byte(IMG_MEM_OFFSET + RAM + 3);
	expect_open_fails("checksum");
	write_image();
	ck_assert_int_eq(stat(path, &st), 0);
	flip_byte((uint64_t)st.st_size - 30);
	expect_open_fails("trailer");
	write_image();
	flip_byte((uint64_t)st.st_size - 60);
	expect_open_fails("checksum");
}
END_TEST

/* Truncation anywhere, a foreign file and a newer version are refused by name. */
START_TEST(test_truncated_and_foreign)
{
	struct stat st;
	FILE *f;

	write_image();
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(truncate(path, st.st_size - 1), 0);
	expect_open_fails("truncated");
	write_image();
	ck_assert_int_eq(truncate(path, IMG_MEM_OFFSET + 4096), 0);
	expect_open_fails("truncated");
	ck_assert_int_eq(truncate(path, 10), 0);
	expect_open_fails("not a ccvm snapshot image");
	f = fopen(path, "w");
	fputs("#!/bin/sh\necho this is not an image, but it is long enough to have a header..\n", f);
	fclose(f);
	expect_open_fails("no CCVMIMG magic");
	write_image();
	flip_byte(8); /* version 3 -> 67 */
	expect_open_fails("version 67");
}
END_TEST

/* An aborted image leaves nothing behind, and an existing image is untouched. */
START_TEST(test_abort_leaves_old_image)
{
	struct img_header_info info = { .ram_size = RAM };
	struct img_writer *w;
	struct stat before, after;
	char cmd[256];

	write_image();
	ck_assert_int_eq(stat(path, &before), 0);
	ck_assert_int_eq(img_create(path, &info, &w), 0);
	ck_assert_int_eq(img_write_page(w, 0, mem), 0);
	img_abort(w);
	ck_assert_int_eq(stat(path, &after), 0);
	ck_assert_uint_eq(before.st_ino, after.st_ino);
	ck_assert_uint_eq(before.st_size, after.st_size);
	snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) = 1", dir);
	ck_assert_msg(system(cmd) == 0, "temporary file left in %s", dir);
	ck_assert_int_eq(img_create(path, &(struct img_header_info){ .ram_size = 12345 }, &w),
			 -EINVAL);
}
END_TEST

/* A FIFO named as an image is refused at once, not waited on for a writer (F10), and
 * an image written while the process umask is 0 is still private to its user (F12). */
START_TEST(test_fifo_refused_and_mode)
{
	struct img_reader r;
	char err[IMG_ERR_LEN] = "";
	struct stat st;
	mode_t old;

	ck_assert_int_eq(mkfifo(path, 0600), 0);
	ck_assert_int_eq(img_open(path, &r, err), -EINVAL);
	ck_assert_msg(strstr(err, "not a regular file"), "error: %s", err);
	ck_assert_int_eq(unlink(path), 0);
	old = umask(0);
	write_image();
	umask(old);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
}
END_TEST

/* mem chunk by chunk, as the snapshot writer stores it, compressed with @codec; chunk 1
 * is made incompressible first. */
static void write_chunks(enum img_codec codec, int level)
{
	struct img_header_info info = { .ram_size = RAM, .codec = codec, .level = level };
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;
	uint8_t what[IMG_CHUNK / PAGE_SIZE], *scratch = aligned_alloc(PAGE_SIZE, IMG_SCRATCH_SIZE);
	struct img_writer *w;

	ck_assert_ptr_nonnull(scratch);
	srandom(7);
	for (uint64_t i = IMG_CHUNK; i < 2 * IMG_CHUNK; i++)
		mem[i] = (uint8_t)random();
	ck_assert_int_eq(img_create(path, &info, &w), 0);
	for (uint64_t c = 0; c < RAM / IMG_CHUNK; c++) {
		uint64_t zero;

		memset(what, IMG_PAGE_DATA, sizeof(what));
		ck_assert_int_eq(img_chunk_prepare(w, c, mem + c * IMG_CHUNK, what, &zero), 0);
		ck_assert_uint_eq(zero, c == 1 ? 0 : per - per / 3 - 1);
		ck_assert_int_eq(img_chunk_write(w, c, mem + c * IMG_CHUNK, what, scratch), 0);
	}
	ck_assert_int_eq(img_add_section(w, IMG_SEC_VCPUS, "vcpu-state", 10), 0);
	ck_assert_int_eq(img_finish(w), 0);
	free(scratch);
}

/* Compressed with zstd, LZ4 (accelerated at -4, default, high-compression) and auto, an
 * image reads back exactly; a chunk that shrinks is stored as a frame and takes fewer
 * blocks, one that does not is stored raw (auto: a codec of its choice for the first,
 * raw for the second, and the mix of codecs says so). */
START_TEST(test_compressed_round_trip)
{
	static const enum img_codec codecs[] = { IMG_CODEC_ZSTD, IMG_CODEC_LZ4, IMG_CODEC_LZ4,
						 IMG_CODEC_LZ4, IMG_CODEC_AUTO };
	static const int levels[] = { 3, -4, 1, 9, 0 };

	for (int i = 0; i < 5; i++) {
		bool aut = codecs[i] == IMG_CODEC_AUTO;
		uint64_t raw, stored, mix[IMG_CODEC_AUTO];
		struct img_reader r;
		char err[IMG_ERR_LEN];

		write_chunks(codecs[i], levels[i]);
		expect_image_is_mem();
		ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
		ck_assert_uint_eq(r.version, IMG_VERSION);
		ck_assert_int_eq(r.codec, codecs[i]);
		ck_assert_int_eq(r.level, levels[i]);
		if (aut)
			ck_assert(r.enc[0].codec == IMG_CODEC_LZ4 || r.enc[0].codec == IMG_CODEC_ZSTD);
		else
			ck_assert_int_eq(r.enc[0].codec, codecs[i]);
		ck_assert_int_eq(r.enc[1].codec, IMG_CODEC_NONE);
		img_reader_mix(&r, mix);
		ck_assert_uint_eq(mix[IMG_CODEC_NONE], 1);
		ck_assert_uint_eq(mix[r.enc[0].codec], 1);
		ck_assert_uint_eq(r.enc[1].data_pages, IMG_CHUNK / PAGE_SIZE);
		img_reader_bytes(&r, &raw, &stored);
		ck_assert_uint_eq(raw, (IMG_CHUNK / PAGE_SIZE / 3 + 1 + IMG_CHUNK / PAGE_SIZE) * PAGE_SIZE);
		ck_assert_uint_lt(stored, raw);
		/* chunk 0 took at most a few pages; chunk 1 all of its 2 MiB */
		ck_assert_uint_lt(img_disk_bytes(path), IMG_CHUNK + 64 * PAGE_SIZE);
		img_close(&r);
	}
}
END_TEST

/* A chunk compressed before the image took it (held copies packed whole): its digest
 * computed from the bytes, its frame stored as it is, and the image reads back exactly.
 * A frame that saves no page, a chunk with a page recorded on its own and an image
 * stored raw are refused, so the writer compresses those as any chunk. */
START_TEST(test_frame_made_elsewhere)
{
	struct img_header_info info = { .ram_size = RAM, .codec = IMG_CODEC_ZSTD, .level = 1 };
	uint8_t what[IMG_CHUNK / PAGE_SIZE], *frame = aligned_alloc(PAGE_SIZE, IMG_CHUNK);
	uint8_t *scratch = aligned_alloc(PAGE_SIZE, IMG_SCRATCH_SIZE);
	struct img_writer *w;
	struct img_reader r;
	char err[IMG_ERR_LEN];
	uint64_t h, zero, pages = 0;
	ssize_t len;

	ck_assert_ptr_nonnull(frame);
	ck_assert_ptr_nonnull(scratch);
	ck_assert_int_eq(img_create(path, &info, &w), 0);
	memset(what, IMG_PAGE_DATA, sizeof(what));
	h = img_chunk_digest(0, mem, what);
	for (size_t i = 0; i < sizeof(what); i++)
		pages += what[i] == IMG_PAGE_DATA;
	ck_assert_uint_eq(pages, IMG_CHUNK / PAGE_SIZE / 3 + 1); /* zero pages became holes */
	len = codec_compress(IMG_CODEC_ZSTD, 1, mem, IMG_CHUNK, frame, IMG_CHUNK);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(img_frame_check(w, 0, (uint64_t)len, what), 0);
	ck_assert_int_eq(img_frame_check(w, 0, pages * PAGE_SIZE, what), -EINVAL);
	what[5] = IMG_PAGE_DONE;
	ck_assert_int_eq(img_frame_check(w, 0, (uint64_t)len, what), -EINVAL);
	what[5] = IMG_PAGE_HOLE;
	ck_assert_int_eq(img_chunk_add_digest(w, 0, what, h, &zero), 0);
	ck_assert_uint_eq(zero, IMG_CHUNK / PAGE_SIZE - pages);
	ck_assert_int_eq(img_chunk_write_frame(w, 0, frame, (uint64_t)len, what), 0);
	memset(what, IMG_PAGE_DATA, sizeof(what));
	ck_assert_int_eq(img_chunk_prepare(w, 1, mem + IMG_CHUNK, what, &zero), 0);
	ck_assert_int_eq(img_chunk_write(w, 1, mem + IMG_CHUNK, what, scratch), 0);
	ck_assert_int_eq(img_finish(w), 0);
	expect_image_is_mem();
	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
	ck_assert_int_eq(r.enc[0].codec, IMG_CODEC_ZSTD);
	ck_assert_uint_eq(r.enc[0].stored_len, (uint64_t)len);
	img_close(&r);

	info.codec = IMG_CODEC_NONE;
	info.level = 0;
	ck_assert_int_eq(img_create(path, &info, &w), 0);
	ck_assert_int_eq(img_frame_check(w, 0, (uint64_t)len, what), -EINVAL);
	img_abort(w);
	free(frame);
	free(scratch);
}
END_TEST

/* A flipped byte in a compressed frame is refused when the chunk is read, before it
 * is decompressed; the other chunks still read. In an image of auto, whose chunks have
 * codecs of their own, the same for its frame and for its raw chunk. */
START_TEST(test_compressed_damage)
{
	static const enum img_codec codecs[] = { IMG_CODEC_ZSTD, IMG_CODEC_LZ4, IMG_CODEC_AUTO };
	struct img_reader r;
	char err[IMG_ERR_LEN];
	uint8_t *chunk = malloc(IMG_CHUNK);

	ck_assert_ptr_nonnull(chunk);
	for (int i = 0; i < 3; i++) {
		write_chunks(codecs[i], codec_default_level(codecs[i]));
		ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
		ck_assert_int_ne(r.enc[0].codec, IMG_CODEC_NONE);
		flip_byte(IMG_MEM_OFFSET + r.enc[0].stored_len / 2);
		ck_assert_int_eq(img_read_chunk(&r, 0, chunk), -EBADMSG);
		ck_assert_int_eq(img_read_chunk(&r, 1, chunk), 0);
		img_close(&r);
	}
	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err); /* auto's raw chunk */
	flip_byte(IMG_MEM_OFFSET + IMG_CHUNK + 12345);
	ck_assert_int_eq(img_read_chunk(&r, 1, chunk), -EBADMSG);
	img_close(&r);
	free(chunk);
}
END_TEST

/* An image of format version 1, written by ccvm before compression existed (the
 * fixture was made by 445044d's image.c from the same memory as setup's), still opens
 * and reads back, every chunk raw. */
#define V1_SIZE 5243064 /* bytes of the fixture: header, 4 MiB of memory, sections */

START_TEST(test_version1_reads)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];
	uint64_t raw, stored;

	fixture_unpack("tests/unit/data/image-v1.img.zst", V1_SIZE, path);
	expect_image_is_mem();
	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
	ck_assert_uint_eq(r.version, 1);
	ck_assert_int_eq(r.enc[0].codec, IMG_CODEC_NONE);
	img_reader_bytes(&r, &raw, &stored);
	ck_assert_uint_eq(raw, stored);
	img_close(&r);
}
END_TEST

/* Write @file as a child of @parent_file (recorded as @recorded) holding the pages of
 * @now that differ from @before, compressed with @codec. */
static void write_child(const char *file, const char *parent_file, const char *recorded,
			const uint8_t *before, const uint8_t *now, enum img_codec codec)
{
	struct img_header_info info = { .ram_size = RAM, .codec = codec, .flags = IMG_FLAG_CHILD,
					.level = codec == IMG_CODEC_NONE ? 0 : 1 };
	uint8_t what[IMG_CHUNK / PAGE_SIZE];
	uint8_t *buf = aligned_alloc(PAGE_SIZE, IMG_CHUNK), *scratch = aligned_alloc(PAGE_SIZE, IMG_SCRATCH_SIZE);
	struct img_writer *w;
	struct img_reader pr;
	char err[IMG_ERR_LEN];

	ck_assert_msg(img_open(parent_file, &pr, err) == 0, "%s", err);
	ck_assert_int_eq(img_create(file, &info, &w), 0);
	ck_assert_int_eq(img_set_parent(w, recorded, pr.identity), 0);
	img_close(&pr);
	for (uint64_t c = 0; c < RAM / IMG_CHUNK; c++) {
		uint64_t zero;

		for (uint64_t i = 0; i < IMG_CHUNK / PAGE_SIZE; i++) {
			uint64_t off = c * IMG_CHUNK + i * PAGE_SIZE;
			bool changed = memcmp(before + off, now + off, PAGE_SIZE) != 0;

			what[i] = changed ? IMG_PAGE_DATA : IMG_PAGE_PARENT;
			if (changed)
				memcpy(buf + i * PAGE_SIZE, now + off, PAGE_SIZE);
			else /* not held: reads as zero for the compressor */
				memset(buf + i * PAGE_SIZE, 0, PAGE_SIZE);
		}
		ck_assert_int_eq(img_chunk_prepare(w, c, buf, what, &zero), 0);
		ck_assert_int_eq(img_chunk_write(w, c, buf, what, scratch), 0);
	}
	ck_assert_int_eq(img_add_section(w, IMG_SEC_VCPUS, "vcpu-child", 10), 0);
	ck_assert_int_eq(img_finish(w), 0);
	free(buf);
	free(scratch);
}

/* Every chunk of the chain at @file equals @want. */
static void expect_chain_is(const char *file, const uint8_t *want)
{
	struct img_reader r;
	char err[IMG_ERR_LEN];
	uint8_t *chunk = malloc(IMG_CHUNK);

	ck_assert_msg(img_open(file, &r, err) == 0, "%s", err);
	for (uint64_t c = 0; c < r.n_chunks; c++) {
		bool data;

		memset(chunk, 0xaa, IMG_CHUNK); /* a reused buffer: nothing stale may show */
		ck_assert_int_eq(img_load_chunk(&r, c, chunk, &data), 0);
		if (!data)
			memset(chunk, 0, IMG_CHUNK);
		ck_assert_msg(memcmp(chunk, want + c * IMG_CHUNK, IMG_CHUNK) == 0, "%s: chunk %llu",
			      file, (unsigned long long)c);
	}
	img_close(&r);
	free(chunk);
}

/* mem, then 10% of its pages rewritten: some with data, one data page made zero (it
 * must not let the parent's page show through), one zero page given data; with seed
 * 2, all of chunk 1 too. */
static uint8_t *rewritten(const uint8_t *from, uint64_t seed)
{
	uint8_t *m = malloc(RAM);

	memcpy(m, from, RAM);
	for (uint64_t p = seed % 10; p < PAGES; p += 10)
		memset(m + p * PAGE_SIZE, (int)(p + seed) | 0x80, PAGE_SIZE);
	memset(m + 3 * PAGE_SIZE, 0, PAGE_SIZE);          /* page 3 had data */
	memset(m + 4 * PAGE_SIZE + 17, (int)seed, 100);  /* page 4 was zero */
	if (seed == 2) /* the whole of chunk 1: a child holding a chunk whole */
		for (uint64_t p = IMG_CHUNK / PAGE_SIZE; p < 2 * IMG_CHUNK / PAGE_SIZE; p++)
			memset(m + p * PAGE_SIZE, 0x42, PAGE_SIZE); /* even: no older page is */
	return m;
}

/* A chain full <- child (raw) <- grandchild (zstd) restores each instant exactly; the
 * child holds only what changed; merge writes one full image equal to the chain. */
START_TEST(test_chain_round_trip)
{
	char child[192], grand[192], merged[192];
	uint8_t *m1 = rewritten(mem, 1), *m2 = rewritten(m1, 2);
	struct img_reader r;
	char err[IMG_ERR_LEN];

	snprintf(child, sizeof(child), "%s/child.img", dir);
	snprintf(grand, sizeof(grand), "%s/grand.img", dir);
	snprintf(merged, sizeof(merged), "%s/merged.img", dir);
	write_image();
	write_child(child, path, "snap.img", mem, m1, IMG_CODEC_NONE);
	write_child(grand, child, child, m1, m2, IMG_CODEC_ZSTD); /* an absolute path */
	expect_chain_is(child, m1);
	expect_chain_is(grand, m2);
	ck_assert_msg(img_open(child, &r, err) == 0, "%s", err);
	ck_assert_ptr_nonnull(r.parent);
	ck_assert_ptr_null(r.parent->parent);
	ck_assert_str_eq(r.parent_path, "snap.img");
	ck_assert_uint_lt(img_disk_bytes(child), img_disk_bytes(path) / 2); /* 10% of pages vs a third */
	img_close(&r);
	ck_assert_msg(img_open(grand, &r, err) == 0, "%s", err);
	ck_assert_int_eq(r.enc[0].codec, IMG_ENC_PACKED | IMG_CODEC_ZSTD); /* some pages */
	ck_assert_int_eq(r.enc[1].codec, IMG_CODEC_ZSTD);                  /* all of them */
	img_close(&r);
	ck_assert_msg(img_merge(grand, merged, err) == 0, "%s", err);
	expect_image_is_mem_at(merged, m2);
	ck_assert_msg(img_open(merged, &r, err) == 0, "%s", err);
	ck_assert_ptr_null(r.parent);
	ck_assert_uint_eq(r.info.flags, 0);
	ck_assert_int_eq(r.codec, IMG_CODEC_ZSTD);
	img_close(&r);
	ck_assert_int_ne(img_merge(grand, child, err), 0); /* never over the chain */
	ck_assert_msg(strstr(err, "of the chain"), "%s", err);
	free(m1);
	free(m2);
}
END_TEST

/* A missing parent, a parent replaced by another image, a damaged child frame, a
 * child without a parent and an unknown flag are each refused with a message. */
START_TEST(test_chain_refused)
{
	char child[192], moved[192];
	uint8_t *m1 = rewritten(mem, 1), *chunk = malloc(IMG_CHUNK);
	struct img_header_info info = { .ram_size = RAM, .flags = IMG_FLAG_CHILD };
	struct img_writer *w;
	struct img_reader r;
	char err[IMG_ERR_LEN];
	bool data;

	snprintf(child, sizeof(child), "%s/child.img", dir);
	snprintf(moved, sizeof(moved), "%s/moved.img", dir);
	write_image();
	write_child(child, path, "snap.img", mem, m1, IMG_CODEC_ZSTD);
	ck_assert_int_eq(rename(path, moved), 0);
	ck_assert_int_ne(img_open(child, &r, err), 0);
	ck_assert_msg(strstr(err, "is missing"), "%s", err);
	mem[5 * PAGE_SIZE] ^= 1; /* another image under the parent's name */
	write_image();
	ck_assert_int_ne(img_open(child, &r, err), 0);
	ck_assert_msg(strstr(err, "not the image it was taken after"), "%s", err);
	ck_assert_int_eq(rename(moved, path), 0);
	mem[5 * PAGE_SIZE] ^= 1;
	ck_assert_msg(img_open(child, &r, err) == 0, "%s", err);
	flip_byte_of(child, IMG_MEM_OFFSET + r.enc[0].stored_len / 2);
	ck_assert_int_eq(img_load_chunk(&r, 0, chunk, &data), -EBADMSG);
	img_close(&r);

	ck_assert_int_eq(img_create(child, &info, &w), 0);
	ck_assert_int_eq(img_finish(w), -EINVAL); /* no parent named */
	info.flags = 4;
	ck_assert_int_eq(img_create(child, &info, &w), -EINVAL);
	free(m1);
	free(chunk);
}
END_TEST

/* A temporary left by a process killed mid-snapshot that had this pid does not make
 * the next snapshot fail and is swept (nobody holds its lock); the image it was
 * replacing stays intact. */
START_TEST(test_stale_temporary)
{
	char tmp[256];
	FILE *f;

	write_image();
	snprintf(tmp, sizeof(tmp), "%s/.snap.img.tmp.%d", dir, (int)getpid());
	f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	fputs("half an image", f);
	fclose(f);
	write_image();
	expect_image_is_mem();
	ck_assert_int_eq(access(tmp, F_OK), -1);
}
END_TEST

/* Repro 7: what a guest plants in the image's directory under every name it could
 * know (the old pid-only temporary, as a directory, which no unlink removes) fails no
 * snapshot; two snapshots' temporaries are never named alike. */
START_TEST(test_temporary_unpredictable)
{
	struct img_header_info info = { .ram_size = RAM };
	struct img_writer *w1, *w2;
	char plant[256], t1[256], t2[256];

	snprintf(plant, sizeof(plant), "%s/.snap.img.tmp.%d", dir, (int)getpid());
	ck_assert_int_eq(mkdir(plant, 0700), 0);
	write_image();
	expect_image_is_mem();
	ck_assert_int_eq(img_create(path, &info, &w1), 0);
	ck_assert(find_temporary(getpid(), t1, sizeof(t1)));
	ck_assert_int_eq(img_create(path, &info, &w2), 0);
	img_abort(w1);
	ck_assert(find_temporary(getpid(), t2, sizeof(t2)));
	ck_assert_str_ne(t1, t2);
	img_abort(w2);
	ck_assert_int_eq(rmdir(plant), 0);
}
END_TEST

/* kill -9 of a process halfway through writing a snapshot over an existing image
 * (item 11): the image at that path still opens intact with its old contents, and the
 * next snapshot to that path succeeds and removes the dead writer's temporary. */
START_TEST(test_killed_writer)
{
	struct img_header_info info = { .ram_size = RAM };
	int pipefd[2], status;
	char tmp[256], ready;
	pid_t pid;

	write_image();
	ck_assert_int_eq(pipe(pipefd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct img_writer *w;
		uint8_t page[PAGE_SIZE];

		memset(page, 0x5a, sizeof(page));
		if (img_create(path, &info, &w))
			_exit(1);
		for (uint64_t p = 0; p < PAGES / 2; p++)
			if (img_write_page(w, p, page))
				_exit(1);
		if (write(pipefd[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(pipefd[1]);
	ck_assert_int_eq(read(pipefd[0], &ready, 1), 1);
	close(pipefd[0]);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_msg(find_temporary(pid, tmp, sizeof(tmp)), "the killed writer's temporary is missing");
	expect_image_is_mem();
	write_image();
	expect_image_is_mem();
	ck_assert_msg(access(tmp, F_OK) < 0, "stale temporary %s was not removed", tmp);
	ck_assert_int_eq(entries_in_dir(), 1);
}
END_TEST

/* A temporary whose writer is alive is never swept: one named for a pid that exists
 * (pid 1 always does), and one whose pid is gone but whose lock is held (a writer in
 * another pid namespace); the latter goes once nobody holds the lock. */
START_TEST(test_live_writer_kept)
{
	char live[256], locked[256];
	pid_t gone = fork();
	int fd;

	ck_assert_int_ge(gone, 0);
	if (gone == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(gone, NULL, 0), gone);
	snprintf(live, sizeof(live), "%s/.snap.img.tmp.1", dir);
	snprintf(locked, sizeof(locked), "%s/.snap.img.tmp.%d", dir, (int)gone);
	fd = open(live, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = open(locked, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	write_image();
	ck_assert_msg(access(live, F_OK) == 0, "a live pid's temporary was removed");
	ck_assert_msg(access(locked, F_OK) == 0, "a locked temporary was removed");
	close(fd);
	write_image();
	ck_assert_msg(access(live, F_OK) == 0, "a live pid's temporary was removed");
	ck_assert_msg(access(locked, F_OK) < 0, "an unlocked dead writer's temporary stayed");
}
END_TEST

/* Write @limit bytes at most (RLIMIT_FSIZE: writes past it fail with EFBIG), then try
 * to write a snapshot over the image at path: return what the writer reported. */
static int write_with_size_limit(rlim_t limit)
{
	struct img_header_info info = { .ram_size = RAM };
	static uint8_t section[256 << 10];
	struct rlimit rl = { limit, limit };
	struct img_writer *w;
	int rc;

	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	rc = img_create(path, &info, &w);
	if (rc)
		return rc;
	for (uint64_t p = 0; p < PAGES && !rc; p++)
		rc = img_write_page(w, p, mem + p * PAGE_SIZE);
	if (!rc)
		rc = img_add_section(w, IMG_SEC_PROCESS, section, sizeof(section));
	if (rc) {
		img_abort(w);
		return rc;
	}
	return img_finish(w);
}

/* A write error (here EFBIG from a file size limit; ENOSPC and EIO take the same path)
 * fails that snapshot with the error, leaves the old image intact and no temporary,
 * whether it strikes when the file is sized or when the tail is written. */
START_TEST(test_write_error)
{
	const rlim_t limits[] = { IMG_MEM_OFFSET + RAM / 2, IMG_MEM_OFFSET + RAM + 4096 };

	write_image();
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		int status;
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(write_with_size_limit(limits[i]) == -EFBIG ? 0 : 1);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "limit %llu: the writer did not report EFBIG",
			      (unsigned long long)limits[i]);
		expect_image_is_mem();
		ck_assert_int_eq(entries_in_dir(), 1);
	}
}
END_TEST

/* G2: a child whose parent is a device, a FIFO, or a link to a device is refused with
 * a message, and the device or FIFO is never opened: inotify sees no IN_OPEN. */
START_TEST(test_parent_never_opened)
{
	char child[192], fifo[192], node[192], link[192], why[IMG_ERR_LEN];
	uint8_t *m1 = rewritten(mem, 2);
	struct inotify_event ev;
	struct img_reader r;
	const char *named[3];
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	snprintf(child, sizeof(child), "%s/child.img", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo.img", dir);
	snprintf(node, sizeof(node), "%s/zero", dir);
	snprintf(link, sizeof(link), "%s/link.img", dir);
	write_image();
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	/* Our own /dev/zero where we may make one, so nothing else opens it meanwhile. */
	if (mknod(node, S_IFCHR | 0600, makedev(1, 5)) < 0)
		snprintf(node, sizeof(node), "/dev/zero");
	ck_assert_int_eq(symlink(node, link), 0);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(inotify_add_watch(in, fifo, IN_OPEN), 0);
	ck_assert_int_ge(inotify_add_watch(in, node, IN_OPEN), 0);
	named[0] = "fifo.img";
	named[1] = node;
	named[2] = "link.img";
	for (int i = 0; i < 3; i++) {
		write_child(child, path, named[i], mem, m1, IMG_CODEC_NONE);
		ck_assert_msg(img_open(child, &r, why) != 0, "parent %s accepted", named[i]);
		ck_assert_msg(strstr(why, "not a regular file") || strstr(why, "symbolic link"),
			      "parent %s: %s", named[i], why);
	}
	ck_assert_int_eq(img_open(fifo, &r, why), -EINVAL); /* named directly, too */
	ck_assert_msg(read(in, &ev, sizeof(ev)) < 0 && errno == EAGAIN,
		      "the FIFO or the device was opened");
	close(in);
	free(m1);
}
END_TEST

#define RACE_PAUSE_US 20000

static bool race_stop;

/* What a guest in the image's directory does: plant a link under the writer's
 * temporary name, over and over, aiming at a file outside. */
static void *link_racer(void *victim)
{
	char stage[192], tmp[192];

	snprintf(stage, sizeof(stage), "%s/stage", dir);
	snprintf(tmp, sizeof(tmp), "%s/.snap.img.tmp.%d", dir, (int)getpid());
	while (!__atomic_load_n(&race_stop, __ATOMIC_RELAXED)) {
		unlink(stage);
		if (symlink(victim, stage) == 0)
			rename(stage, tmp);
		usleep(RACE_PAUSE_US); /* a pace some snapshots get through */
	}
	unlink(stage);
	return NULL;
}

/* G1: while links race in its directory, the writer never writes through one: the
 * file they aim at stays as it was, and each image is written whole or reported. */
START_TEST(test_links_never_followed)
{
	char victim[] = "/tmp/ccvm-victim-XXXXXX", back[16] = "";
	struct img_header_info info = { .ram_size = RAM, .policy = 1 };
	int vfd = mkstemp(victim), made = 0;
	pthread_t racer;

	ck_assert_int_ge(vfd, 0);
	ck_assert_int_eq(write(vfd, "untouched", 9), 9);
	ck_assert_int_eq(pthread_create(&racer, NULL, link_racer, victim), 0);
	for (int i = 0; i < 300; i++) {
		struct img_writer *w;
		int rc = img_create(path, &info, &w);

		if (rc)
			continue; /* refused under the race: reported, nothing written */
		rc = img_write_pages(w, 0, mem, RAM / PAGE_SIZE);
		if (!rc)
			rc = img_finish(w);
		else
			img_abort(w);
		if (rc == 0) { /* a success is this image, under its name, not a link */
			struct stat st;

			ck_assert_int_eq(lstat(path, &st), 0);
			ck_assert_msg(S_ISREG(st.st_mode), "a link took the image's name");
			expect_image_is_mem();
			made++;
		}
	}
	__atomic_store_n(&race_stop, true, __ATOMIC_RELAXED);
	pthread_join(racer, NULL);
	ck_assert_int_eq(pread(vfd, back, sizeof(back), 0), 9);
	ck_assert_msg(memcmp(back, "untouched", 9) == 0, "the writer wrote through a link");
	close(vfd);
	unlink(victim);
	ck_assert_int_gt(made, 0);
}
END_TEST

/* Rewrite @file's section table with one more section, of @type and @len bytes of
 * holes: what a crafted sparse image claims. Its checksums are right. */
static void add_sparse_section(const char *file, uint32_t type, uint64_t len)
{
	uint8_t trailer[48], table[17 * 32];
	int fd = open(file, O_RDWR);
	struct stat st;
	uint64_t toff, n, at, h;
	XXH3_state_t *x = XXH3_createState();

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(pread(fd, trailer, 48, st.st_size - 48), 48);
	memcpy(&toff, trailer + 8, 8);
	n = trailer[16];
	ck_assert_int_eq(pread(fd, table, n * 32, (off_t)toff), (ssize_t)(n * 32));
	memset(table + n * 32, 0, 32);
	memcpy(table + n * 32, &type, 4);
	memcpy(table + n * 32 + 8, &toff, 8);
	memcpy(table + n * 32 + 16, &len, 8);
	at = toff + len;
	n++;
	trailer[16] = (uint8_t)n;
	memcpy(trailer + 8, &at, 8);
	h = at + n * 32 + 48;
	memcpy(trailer + 24, &h, 8);
	XXH3_64bits_reset(x);
	XXH3_64bits_update(x, table, n * 32);
	XXH3_64bits_update(x, trailer, 40);
	h = XXH3_64bits_digest(x);
	memcpy(trailer + 40, &h, 8);
	XXH3_freeState(x);
	ck_assert_int_eq(ftruncate(fd, (off_t)toff), 0);
	ck_assert_int_eq(pwrite(fd, table, n * 32, (off_t)at), (ssize_t)(n * 32));
	ck_assert_int_eq(pwrite(fd, trailer, 48, (off_t)(at + n * 32)), 48);
	close(fd);
}

/* G5: each kind of section has its own longest length: a sparse image claiming a
 * section of gigabytes is refused before anything is allocated for it, and a writer
 * makes no section a reader would refuse. */
START_TEST(test_section_lengths_bounded)
{
	static const uint32_t kinds[] = { IMG_SEC_VCPUS, IMG_SEC_PROCESS, IMG_SEC_INFO, 99 };
	struct img_header_info info = { .ram_size = RAM, .policy = 1 };
	char why[IMG_ERR_LEN];
	struct img_reader r;
	struct img_writer *w;
	void *big = calloc(1, IMG_MAX_PROCESS_LEN + 1);

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		write_image();
		add_sparse_section(path, kinds[i], 8ULL << 30);
		ck_assert_int_eq(img_open(path, &r, why), -EINVAL);
		ck_assert_msg(strstr(why, "longer than that kind may be"), "%s", why);
	}
	ck_assert_ptr_nonnull(big);
	ck_assert_int_eq(img_create(path, &info, &w), 0);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_VCPUS, big, IMG_MAX_VCPUS_LEN + 1), -E2BIG);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_PROCESS, big, IMG_MAX_PROCESS_LEN + 1), -E2BIG);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_PROCESS, big, IMG_MAX_PROCESS_LEN), 0);
	img_abort(w);
	free(big);
}
END_TEST

#define CRAFT_RAM      (64ULL << 30)  /* what the crafted header claims */
#define CRAFT_WINDOWS  (100ULL << 30) /* and its processes' memory section */
#define CRAFT_RSS_KIB  (256L << 10)   /* the most inspect may take to refuse it */

/* Set the RAM size @file's header claims, its checksum made right. */
static void patch_header_ram(const char *file, uint64_t ram)
{
	uint8_t hdr[64];
	uint64_t h;
	int fd = open(file, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	memcpy(hdr + 16, &ram, 8);
	h = XXH3_64bits(hdr, 56);
	memcpy(hdr + 56, &h, 8);
	ck_assert_int_eq(pwrite(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	close(fd);
}

static void inspect_crafted(void *file)
{
	FILE *out = fopen("/dev/null", "w");

	if (!out || inspect_image(file, out) == 0)
		dprintf(STDERR_FILENO, "inspect accepted the crafted image\n");
	if (out)
		fclose(out);
}

/* Repro 4: a sparse image whose header claims 64 GiB of RAM and whose processes'
 * memory section claims 100 GiB (within 4x that RAM) is refused by `ccvm inspect`
 * (inspect_image) with a message that says what is wrong, in under 256 MiB of RSS;
 * one claiming more RAM than the largest VM is refused at the header. */
START_TEST(test_crafted_sparse_image)
{
	struct img_header_info info = { .ram_size = CRAFT_RAM, .policy = 1 };
	struct img_writer *w;
	struct child_result r;
	char why[IMG_ERR_LEN];
	struct img_reader rd;

	ck_assert_int_eq(img_create(path, &info, &w), 0);
	ck_assert_int_eq(img_finish(w), 0);
	add_sparse_section(path, IMG_SEC_WINDOWS, CRAFT_WINDOWS);
	run_child(inspect_crafted, path, &r);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status 0x%x: %s",
		      r.status, r.err);
	ck_assert_msg(strstr(r.err, "no data for most of them") && !strstr(r.err, "accepted"),
		      "%s", r.err);
	ck_assert_msg(r.maxrss_kib < CRAFT_RSS_KIB, "inspect took %ld KiB to refuse it",
		      r.maxrss_kib);
	unlink(path);
	info.ram_size = LAYOUT_MAX_RAM + IMG_CHUNK;
	ck_assert_int_eq(img_create(path, &info, &w), -EINVAL); /* no writer makes one */
	write_image();
	patch_header_ram(path, LAYOUT_MAX_RAM + IMG_CHUNK);
	ck_assert_int_eq(img_open(path, &rd, why), -EINVAL);
	ck_assert_msg(strstr(why, "more than the largest VM"), "%s", why);
}
END_TEST

/* A pre-copy (image_pre.c): pages written ahead of the instant, some of them again;
 * the ones kept stand, a rewritten one is recorded anew, one that ends as a hole reads
 * as zero although bytes were written there, and the checksums hold. Without a codec
 * every chunk is raw; with one, round 0 framed chunk 0 and what was written into it
 * afterwards stands in the patch area, where a flipped byte fails the chunk. */
/* @src's bytes into a new @dst. */
static void copy_file(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char buf[65536];
	ssize_t n;

	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(out, 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)n), n);
	ck_assert_int_eq(n, 0);
	close(in);
	close(out);
}

/* @file compacted: it reads as @want, with no patch left and every chunk that holds
 * data a zstd frame or raw. */
static void expect_compacts(const char *file, const uint8_t *want)
{
	struct compact_job job = { .level = COMPACT_LEVEL };
	char err[IMG_ERR_LEN] = "";
	struct img_reader r;

	ck_assert_msg(img_compact(file, &job, err) == 0, "%s", err);
	ck_assert_uint_gt(job.bytes_in, 0);
	ck_assert_uint_gt(job.bytes_out, 0);
	expect_image_is_mem_at(file, want);
	ck_assert_msg(img_open(file, &r, err) == 0, "%s", err);
	ck_assert_uint_eq(r.n_patches, 0);
	ck_assert_uint_eq(r.info.flags & IMG_FLAG_PATCHED, 0);
	ck_assert_int_eq(r.codec, IMG_CODEC_ZSTD);
	for (uint64_t c = 0; c < r.n_chunks; c++)
		ck_assert(r.enc[c].codec == IMG_CODEC_ZSTD || r.enc[c].codec == IMG_CODEC_NONE);
	img_close(&r);
}

/* A patched image (at path, equal to @want) as a parent: a child over it, a page of
 * its framed chunk and one of a raw chunk changed, reads as the chain; merged, the
 * child and the patched image alone are full images without patches. */
static void precopy_descendants(const uint8_t *want)
{
	char child[160], merged[160], err[IMG_ERR_LEN];
	uint8_t *now = malloc(RAM);
	struct img_reader r;

	ck_assert_ptr_nonnull(now);
	memcpy(now, want, RAM);
	memset(now + 2 * PAGE_SIZE, 0x99, PAGE_SIZE);
	memset(now + RAM - PAGE_SIZE, 0x98, PAGE_SIZE);
	snprintf(child, sizeof(child), "%s/child.img", dir);
	snprintf(merged, sizeof(merged), "%s/merged.img", dir);
	write_child(child, path, strrchr(path, '/') + 1, want, now, IMG_CODEC_ZSTD);
	expect_chain_is(child, now);
	ck_assert_msg(img_merge(child, merged, err) == 0, "%s", err);
	expect_image_is_mem_at(merged, now);
	ck_assert_msg(img_merge(path, merged, err) == 0, "%s", err);
	expect_image_is_mem_at(merged, want);
	ck_assert_msg(img_open(merged, &r, err) == 0, "%s", err);
	ck_assert_uint_eq(r.n_patches, 0);
	ck_assert_uint_eq(r.info.flags, 0);
	img_close(&r);
	/* Compacted (a copy): the patches folded in; a child is refused. */
	copy_file(path, merged);
	expect_compacts(merged, want);
	{
		struct compact_job job = { .level = COMPACT_LEVEL };

		ck_assert_int_eq(img_compact(child, &job, err), -EINVAL);
		ck_assert_msg(strstr(err, "incremental"), "%s", err);
	}
	unlink(child);
	unlink(merged);
	free(now);
}

/* The image at path is damaged: compacting it fails naming the chunk, and leaves it
 * as it was (the same file), with no temporary beside it. */
static void expect_compact_refuses_damage(void)
{
	struct compact_job job = { .level = COMPACT_LEVEL };
	char err[IMG_ERR_LEN] = "";
	struct stat a, b;

	ck_assert_int_eq(stat(path, &a), 0);
	ck_assert_int_eq(img_compact(path, &job, err), -EBADMSG);
	ck_assert_msg(strstr(err, "chunk 0") && strstr(err, "damaged"), "%s", err);
	ck_assert_int_eq(stat(path, &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_mtime == b.st_mtime);
	ck_assert_int_eq(entries_in_dir(), 1);
}

static void precopy_rewrites(enum img_codec codec)
{
	struct img_header_info info = { .ram_size = RAM, .codec = codec,
					.level = codec == IMG_CODEC_NONE ? 0 : 1 };
	const uint64_t per = IMG_CHUNK / PAGE_SIZE;
	uint8_t what[IMG_CHUNK / PAGE_SIZE], *scratch = aligned_alloc(PAGE_SIZE, IMG_SCRATCH_SIZE);
	uint8_t *early = aligned_alloc(PAGE_SIZE, 4 * PAGE_SIZE), *want = calloc(1, RAM);
	uint8_t *chunk = aligned_alloc(PAGE_SIZE, IMG_CHUNK);
	struct img_writer *w;
	struct img_reader r;
	char err[IMG_ERR_LEN];

	ck_assert_ptr_nonnull(scratch);
	ck_assert_ptr_nonnull(early);
	ck_assert_ptr_nonnull(want);
	ck_assert_ptr_nonnull(chunk);
	for (int i = 0; i < 4; i++)
		memset(early + i * PAGE_SIZE, 0x40 + i, PAGE_SIZE);
	ck_assert_int_eq(img_create(path, &info, &w), 0);
	ck_assert_int_eq(img_precopy_begin(w), 0);
	ck_assert_int_eq(img_precopy_pages(w, 0, early, 4), 0);
	ck_assert_int_eq(img_precopy_pages(w, PAGES - 1, early + PAGE_SIZE, 1), 0);
	ck_assert_int_eq(img_precopy_first_done(w), 0);
	ck_assert_int_eq(img_precopy_pages(w, 3, early, 1), 0); /* page 3 again: 0x40 */
	ck_assert_int_eq(img_precopy_pages(w, PAGES - 1, early, 2), -EINVAL);
	ck_assert(img_precopied(w, 0) && img_precopied(w, 3) && !img_precopied(w, 4));
	/* The instant: pages 0 and 3 stand; 1 was rewritten; 2 became zero; the last page
	 * became zero too. */
	img_precopy_keep(w, 0);
	img_precopy_keep(w, 3);
	memcpy(want, early, PAGE_SIZE);
	memcpy(want + 3 * PAGE_SIZE, early, PAGE_SIZE);
	memset(want + PAGE_SIZE, 0x77, PAGE_SIZE);
	for (uint64_t c = 0; c < RAM / IMG_CHUNK; c++) {
		uint64_t zero;

		memset(what, IMG_PAGE_HOLE, sizeof(what));
		if (c == 0) {
			what[0] = what[3] = IMG_PAGE_DONE;
			what[1] = IMG_PAGE_DATA;
		}
		ck_assert_int_eq(img_chunk_prepare(w, c, want + c * IMG_CHUNK, what, &zero), 0);
		ck_assert_int_eq(img_chunk_write(w, c, want + c * IMG_CHUNK, what, scratch), 0);
		ck_assert_uint_eq(zero, c == 0 ? per - 3 : per);
	}
	ck_assert_int_eq(img_finish(w), 0);
	expect_image_is_mem_at(path, want);
	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
	ck_assert_int_eq(r.enc[0].codec, codec);
	ck_assert_uint_eq(r.enc[0].data_pages, 3);
	ck_assert_int_eq(r.enc[RAM / IMG_CHUNK - 1].codec, IMG_CODEC_NONE); /* 1 page: raw */
	/* Patches: page 1's new bytes, page 2's zeros (page 3's rewrite went before the
	 * instant, into the slot it kept). */
	ck_assert_uint_eq(r.n_patches, codec == IMG_CODEC_NONE ? 0 : 3);
	ck_assert_int_eq(!!(r.info.flags & IMG_FLAG_PATCHED), codec != IMG_CODEC_NONE);
	if (codec != IMG_CODEC_NONE) {
		precopy_descendants(want);
		ck_assert_uint_eq(r.patch_pfn[0], 1);
		ck_assert_int_eq(img_read_chunk(&r, 0, chunk), 0);
		flip_byte(r.patch_off[0] + 100);
		ck_assert_int_eq(img_read_chunk(&r, 0, chunk), -EBADMSG);
		expect_compact_refuses_damage();
	}
	img_close(&r);
	free(chunk);
	free(scratch);
	free(early);
	free(want);
}

/* The yield of test_compact: the image replaced by another before its first chunk. */
static int compact_replace(void *ctx)
{
	const char *other = ctx;

	if (access(other, F_OK) == 0)
		ck_assert_int_eq(rename(other, path), 0);
	return 0;
}

/* ccvm compact on a raw image with a section longer than a piece (streamed over): the
 * same memory and sections, smaller; an image replaced while it is compacted stays the
 * one that replaced it; a yield that gives up leaves the image as it was. */
START_TEST(test_compact)
{
	static uint8_t big[3 << 20];
	struct compact_job job = { .level = 1, .yield = compact_replace };
	char err[IMG_ERR_LEN] = "", other[160];
	struct img_header_info info = { .ram_size = RAM, .policy = 1, .created_ns = 123 };
	struct img_writer *w;
	struct img_reader r;
	struct stat st;
	void *data;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 / 4096);
	ck_assert_int_eq(img_create(path, &info, &w), 0);
	for (uint64_t p = 0; p < PAGES; p++)
		ck_assert_int_eq(img_write_page(w, p, page_zero(mem + p * PAGE_SIZE) ? NULL :
						mem + p * PAGE_SIZE), 0);
	ck_assert_int_eq(img_stream_begin(w, IMG_SEC_SHM), 0);
	ck_assert_int_eq(img_stream_record(w, NULL, 0, big, sizeof(big)), 0);
	ck_assert_int_eq(img_stream_end(w), 0);
	ck_assert_int_eq(img_add_section(w, IMG_SEC_VCPUS, "vcpu-state", 10), 0);
	ck_assert_int_eq(img_finish(w), 0);
	expect_compacts(path, mem);
	ck_assert_msg(img_open(path, &r, err) == 0, "%s", err);
	ck_assert_int_eq(img_read_section(&r, img_find(&r, IMG_SEC_SHM), &data), 0);
	ck_assert_uint_eq(img_find(&r, IMG_SEC_SHM)->length, sizeof(big));
	ck_assert(memcmp(data, big, sizeof(big)) == 0);
	free(data);
	img_close(&r);

	snprintf(other, sizeof(other), "%s/other.img", dir);
	copy_file(path, other);
	ck_assert_int_eq(stat(other, &st), 0);
	job.ctx = other;
	ck_assert_int_eq(img_compact(path, &job, err), -ESTALE);
	ck_assert_msg(strstr(err, "replaced"), "%s", err);
	{
		struct stat now;

		ck_assert_int_eq(stat(path, &now), 0);
		ck_assert_uint_eq(now.st_ino, st.st_ino); /* the other, under the name */
	}
	ck_assert_int_eq(entries_in_dir(), 1); /* and no temporary */
}
END_TEST

static void count_done(void *ctx)
{
	__atomic_fetch_add((int *)ctx, 1, __ATOMIC_RELAXED);
}

/* Until the compactor told @done of an image, at most 10 s. */
static void wait_done(int *done)
{
	for (int i = 0; i < 10000 && !__atomic_load_n(done, __ATOMIC_RELAXED); i++)
		usleep(1000);
}

/* The image at path holds still as the file @ino, @n entries in its directory (a
 * compaction under way has its temporary there). */
static void expect_untouched(ino_t ino, int n)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_ino, ino);
	ck_assert_int_eq(entries_in_dir(), n);
}

/* Compaction in idle time (compactor.c): an image queued while a snapshot holds the
 * compactor waits (running, held, the file as it was) and is compacted once the hold
 * ends, told through the callback and the figures; one held when the compactor stops
 * is left as it was, its temporary removed. */
START_TEST(test_compactor)
{
	struct compactor c;
	struct compactor_figures f;
	struct compactor_result res;
	struct stat st;
	int done = 0;

	write_image();
	ck_assert_int_eq(stat(path, &st), 0);
	compactor_init(&c, COMPACT_LEVEL, 0, false, count_done, &done);
	ck_assert(!compactor_last(&c, &res));
	compactor_hold(&c, true);
	ck_assert_int_eq(compactor_add(&c, path), 0);
	for (int i = 0; i < 1000 && (compactor_figures(&c, &f), !f.held); i++)
		usleep(1000);
	ck_assert(f.running && f.held);
	expect_untouched(st.st_ino, 2);
	compactor_hold(&c, false);
	wait_done(&done);
	ck_assert_int_eq(done, 1);
	compactor_figures(&c, &f);
	ck_assert_uint_eq(f.images, 1);
	ck_assert(!f.running && f.bytes_in > 0 && f.bytes_out > 0);
	ck_assert(compactor_last(&c, &res) && res.ok && strcmp(res.file, path) == 0);
	expect_image_is_mem();

	ck_assert_int_eq(stat(path, &st), 0);
	compactor_hold(&c, true);
	ck_assert_int_eq(compactor_add(&c, path), 0);
	for (int i = 0; i < 1000 && (compactor_figures(&c, &f), !f.held); i++)
		usleep(1000);
	compactor_fini(&c);
	expect_untouched(st.st_ino, 1);
	ck_assert_int_eq(done, 1);
}
END_TEST

/* A guest for the compactor to watch: while @busy, its threads take a whole core (the
 * clock's own time), else none. Called from the compactor's thread only. */
static bool fake_guest_busy;
static uint64_t fake_guest_cpu, fake_guest_last;

static uint64_t fake_guest_cpu_ns(void *ctx)
{
	uint64_t now = mono_ns();

	(void)ctx;
	if (__atomic_load_n(&fake_guest_busy, __ATOMIC_RELAXED))
		fake_guest_cpu += now - fake_guest_last;
	fake_guest_last = now;
	return fake_guest_cpu;
}

/* Compaction in idle time waits while the guest works: an image queued while the
 * watched guest takes a core stays as it was (running, guest_busy) for many of the
 * compactor's looks, and is compacted once the guest rests. */
START_TEST(test_compactor_waits_for_guest)
{
	struct compactor c;
	struct compactor_figures f;
	struct stat st;
	int done = 0;

	write_image();
	ck_assert_int_eq(stat(path, &st), 0);
	fake_guest_last = mono_ns();
	__atomic_store_n(&fake_guest_busy, true, __ATOMIC_RELAXED);
	compactor_init(&c, COMPACT_LEVEL, 0, false, count_done, &done);
	compactor_watch(&c, fake_guest_cpu_ns, NULL);
	ck_assert_int_eq(compactor_add(&c, path), 0);
	usleep(5 * COMPACTOR_REST_NS / 1000);
	compactor_figures(&c, &f);
	ck_assert(f.running && f.guest_busy && !f.held);
	ck_assert_int_eq(done, 0);
	ck_assert_uint_eq(f.images, 0);
	expect_untouched(st.st_ino, 2);
	__atomic_store_n(&fake_guest_busy, false, __ATOMIC_RELAXED);
	wait_done(&done);
	ck_assert_int_eq(done, 1);
	compactor_figures(&c, &f);
	ck_assert(!f.running && !f.guest_busy && f.images == 1);
	ck_assert_uint_gt(f.cpu_ns, 0); /* its thread's time, compressing included */
	compactor_fini(&c);
	expect_image_is_mem();
}
END_TEST

START_TEST(test_precopy_rewrites)
{
	precopy_rewrites(IMG_CODEC_NONE);
	precopy_rewrites(IMG_CODEC_ZSTD);
}
END_TEST

Suite *image_suite(void)
{
	Suite *s = suite_create("image");
	TCase *tc = tcase_create("format");

	tcase_add_checked_fixture(tc, setup, teardown);
	/* 300 images written and synced under a racer (links_never_followed): seconds on a
	 * busy machine, far past Check's default 4 s; a unit test must not fail on time. */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_streamed_section);
	tcase_add_test(tc, test_streamed_sink);
	tcase_add_test(tc, test_streamed_place_kept);
	tcase_add_test(tc, test_memory_damage);
	tcase_add_test(tc, test_metadata_damage);
	tcase_add_test(tc, test_truncated_and_foreign);
	tcase_add_test(tc, test_abort_leaves_old_image);
	tcase_add_test(tc, test_fifo_refused_and_mode);
	tcase_add_test(tc, test_stale_temporary);
	tcase_add_test(tc, test_temporary_unpredictable);
	tcase_add_test(tc, test_crafted_sparse_image);
	tcase_add_test(tc, test_killed_writer);
	tcase_add_test(tc, test_live_writer_kept);
	tcase_add_test(tc, test_write_error);
	tcase_add_test(tc, test_compressed_round_trip);
	tcase_add_test(tc, test_compressed_damage);
	tcase_add_test(tc, test_frame_made_elsewhere);
	tcase_add_test(tc, test_version1_reads);
	tcase_add_test(tc, test_chain_round_trip);
	tcase_add_test(tc, test_chain_refused);
	tcase_add_test(tc, test_parent_never_opened);
	tcase_add_test(tc, test_links_never_followed);
	tcase_add_test(tc, test_section_lengths_bounded);
	tcase_add_test(tc, test_precopy_rewrites);
	tcase_add_test(tc, test_compact);
	tcase_add_test(tc, test_compactor);
	tcase_add_test(tc, test_compactor_waits_for_guest);
	suite_add_tcase(s, tc);
	return s;
}
