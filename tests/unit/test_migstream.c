/*
 * test_migstream.c - the live-migration stream (snapshot/migstream.c) on plain memory:
 * memory with data, zeros and compressible text and a section longer than a frame
 * arrive byte for byte (zero pages as holes, text compressed); a damaged byte, a cut
 * stream, a foreign or mismatched hello and a frame outside the RAM are refused before
 * anything reaches the destination's memory. A pre-copy plan (the bitmap of pages to
 * come) arrives as it left, and one of another length is refused at both ends. A
 * peer that goes silent ends a read or write at the bound (--peer-timeout).
 */
#include "suites.h"
#include "../../snapshot/image.h"
#include "../../snapshot/migstream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define MS_RAM     (8ULL << 20)
#define MS_SECTION (5ULL << 20) /* longer than a frame: it travels in three */
#define MS_PAGE    4096ULL

static uint8_t *src, *dst, *section;
static int sfd;

/* Source memory: a third random, a third text, a third zero; a section of text. */
static void ms_setup(void)
{
	uint64_t x = 88172645463325252ULL;

	src = calloc(1, MS_RAM);
	dst = calloc(1, MS_RAM);
	section = malloc(MS_SECTION);
	ck_assert(src && dst && section);
	for (uint64_t p = 0; p < MS_RAM / MS_PAGE; p++) {
		if (p % 3 == 0) {
			for (uint64_t i = 0; i < MS_PAGE; i += 8) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				memcpy(src + p * MS_PAGE + i, &x, 8);
			}
		} else if (p % 3 == 1) {
			for (uint64_t i = 0; i < MS_PAGE; i++)
				src[p * MS_PAGE + i] = "the quick brown fox "[i % 20];
		}
	}
	for (uint64_t i = 0; i < MS_SECTION; i++)
		section[i] = (uint8_t)("jumps over the lazy dog"[i % 23] + i / 1000);
	sfd = memfd_create("migstream-test", MFD_CLOEXEC);
	ck_assert_int_ge(sfd, 0);
}

static void ms_teardown(void)
{
	free(src);
	free(dst);
	free(section);
	close(sfd);
}

/* The stream emptied and rewound. */
static void ms_empty(void)
{
	ck_assert_int_eq(ftruncate(sfd, 0), 0);
	ck_assert_int_eq(lseek(sfd, 0, SEEK_SET), 0);
}

/* The whole stream into sfd, rewound: memory, a round, the section, the end. */
static struct mig_out ms_write(enum img_codec codec)
{
	struct mig_out o;

	ms_empty();
	ck_assert_int_eq(mig_out_open(&o, sfd, MS_RAM, codec, codec_default_level(codec)), 0);
	ck_assert_int_eq(mig_send_round(&o, 0), 0);
	ck_assert_int_eq(mig_send_memory(&o, src, 0, MS_RAM), 0);
	ck_assert_int_eq(mig_send_section(&o, IMG_SEC_PROCESS, section, MS_SECTION), 0);
	ck_assert_int_eq(mig_send_section(&o, IMG_SEC_INFO, "", 0), 0);
	ck_assert_int_eq(mig_send_end(&o), 0);
	mig_out_close(&o);
	ck_assert_int_eq(lseek(sfd, 0, SEEK_SET), 0);
	return o;
}

/* Read the stream to its end; the error of the first bad frame, or 0. */
static int ms_read(char *err, size_t errlen, int *sections)
{
	struct mig_in in;
	struct mig_event ev;
	int rc = mig_in_open(&in, sfd, dst, MS_RAM, NULL, err, errlen);

	*sections = 0;
	while (!rc) {
		rc = mig_next(&in, &ev, err, errlen);
		if (rc || ev.type == MIG_END)
			break;
		if (ev.type == MIG_SECTION) {
			if (ev.at == IMG_SEC_PROCESS) {
				ck_assert_uint_eq(ev.len, MS_SECTION);
				ck_assert(memcmp(ev.data, section, MS_SECTION) == 0);
			} else {
				ck_assert_uint_eq(ev.len, 0);
			}
			(*sections)++;
			free(ev.data);
		}
	}
	mig_in_close(&in);
	return rc;
}

START_TEST(test_round_trip)
{
	static const enum img_codec codecs[] = { IMG_CODEC_NONE, IMG_CODEC_LZ4, IMG_CODEC_ZSTD };
	char err[256] = "";
	int sections;

	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++) {
		struct mig_out o = ms_write(codecs[i]);

		memset(dst, 0x77, MS_RAM); /* holes must come out zero */
		ck_assert_msg(ms_read(err, sizeof(err), &sections) == 0, "%s", err);
		ck_assert_int_eq(sections, 2);
		ck_assert_msg(memcmp(src, dst, MS_RAM) == 0, "memory differs (codec %s)",
			      codec_name(codecs[i]));
		ck_assert_uint_eq(o.holes_sent, MS_RAM / MS_PAGE / 3);
		ck_assert_uint_eq(o.pages_sent + o.holes_sent, MS_RAM / MS_PAGE);
		if (codecs[i] != IMG_CODEC_NONE)
			ck_assert_msg(o.bytes_sent < MS_RAM / 3 * 2 + MS_SECTION,
				      "%s sent %llu bytes: the text was not compressed",
				      codec_name(codecs[i]), (unsigned long long)o.bytes_sent);
	}
}
END_TEST

/* One byte of a memory frame's payload flipped: refused, that frame's memory never
 * written. */
START_TEST(test_damaged_byte)
{
	struct mig_frame f;
	char err[256] = "";
	uint8_t b;
	off_t at = sizeof(struct mig_hello);
	int sections;

	ms_write(IMG_CODEC_NONE);
	/* past the round marker, then the first frame: random pages (a payload) */
	at += sizeof(f);
	ck_assert_int_eq(pread(sfd, &f, sizeof(f), at), (ssize_t)sizeof(f));
	ck_assert_uint_eq(f.type, MIG_PAGES);
	ck_assert_int_eq(pread(sfd, &b, 1, at + (off_t)sizeof(f) + 100), 1);
	b ^= 0xff;
	ck_assert_int_eq(pwrite(sfd, &b, 1, at + (off_t)sizeof(f) + 100), 1);
	memset(dst, 0, MS_RAM);
	ck_assert_int_eq(ms_read(err, sizeof(err), &sections), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "checksum"));
	ck_assert_uint_eq(dst[100], 0);
}
END_TEST

/* The stream cut short, a foreign hello, another RAM size, a frame outside the RAM. */
START_TEST(test_refused)
{
	struct mig_in in;
	struct mig_frame f = { .type = MIG_HOLES, .at = MS_RAM, .raw_len = MS_PAGE };
	struct mig_out o;
	char err[256] = "";
	int sections;

	ms_write(IMG_CODEC_ZSTD);
	ck_assert_int_eq(ftruncate(sfd, lseek(sfd, 0, SEEK_END) / 2), 0);
	ck_assert_int_eq(ms_read(err, sizeof(err), &sections), -ECONNRESET);

	ms_empty();
	ck_assert_int_eq(write(sfd, "GARBAGE!garbage!garbage!", 24), 24);
	ck_assert_int_eq(lseek(sfd, 0, SEEK_SET), 0);
	ck_assert_int_eq(mig_in_open(&in, sfd, dst, MS_RAM, NULL, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "not a ccvm migration stream"));

	ms_write(IMG_CODEC_NONE);
	ck_assert_int_eq(mig_in_open(&in, sfd, dst, 2 * MS_RAM, NULL, err, sizeof(err)), -EPROTO);

	ms_empty();
	ck_assert_int_eq(mig_out_open(&o, sfd, MS_RAM, IMG_CODEC_NONE, 0), 0);
	mig_out_close(&o);
	ck_assert_int_eq(write(sfd, &f, sizeof(f)), (ssize_t)sizeof(f));
	ck_assert_int_eq(lseek(sfd, 0, SEEK_SET), 0);
	ck_assert_int_eq(ms_read(err, sizeof(err), &sections), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "outside the RAM"));
}
END_TEST

/* Sections an image does not hold: a type it does not know (2^32 + 1 among them, which
 * a 32-bit type would read as 1), or more bytes than an image of this RAM holds of one. */
START_TEST(test_section_types)
{
	static const uint64_t bad_types[] = { 0, IMG_SEC_LAST + 1, (1ULL << 32) + 1 };
	static uint8_t big[64 << 10];
	struct mig_frame f = { .type = MIG_SECTION };
	struct mig_out o;
	char err[256] = "";
	int sections;

	for (size_t i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
		ms_empty();
		ck_assert_int_eq(mig_out_open(&o, sfd, MS_RAM, IMG_CODEC_NONE, 0), 0);
		mig_out_close(&o);
		f.at = bad_types[i];
		ck_assert_int_eq(write(sfd, &f, sizeof(f)), (ssize_t)sizeof(f));
		ck_assert_int_eq(lseek(sfd, 0, SEEK_SET), 0);
		ck_assert_int_eq(ms_read(err, sizeof(err), &sections), -EPROTO);
		ck_assert_msg(strstr(err, "unknown type"), "type %llu: %s",
			      (unsigned long long)bad_types[i], err);
	}
	/* A parent's identity and path: 64 KiB is more than any. */
	ck_assert_uint_lt(img_section_max(IMG_SEC_PARENT, MS_RAM), sizeof(big));
	ms_empty();
	ck_assert_int_eq(mig_out_open(&o, sfd, MS_RAM, IMG_CODEC_NONE, 0), 0);
	ck_assert_int_eq(mig_send_section(&o, IMG_SEC_PARENT, big, sizeof(big)), 0);
	ck_assert_int_eq(mig_send_end(&o), 0); /* (which flushes what is gathered) */
	mig_out_close(&o);
	ck_assert_int_eq(lseek(sfd, 0, SEEK_SET), 0);
	ck_assert_int_eq(ms_read(err, sizeof(err), &sections), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "more than an image"));
	ck_assert_int_eq(sections, 0);
}
END_TEST

/* The plan: a bit per page, sent and read back whole; another length is refused by the
 * sender, and by the receiver when forged. */
START_TEST(test_plan)
{
	const size_t len = MS_RAM / MS_PAGE / 8;
	uint64_t *bits = calloc(1, len);
	struct mig_frame f = { .type = MIG_PLAN, .len = 8, .raw_len = 8, .total = 8 };
	struct mig_event ev;
	struct mig_out o;
	struct mig_in in;
	char err[256] = "";

	ck_assert_ptr_nonnull(bits);
	bits[0] = 0xf0f0;
	bits[len / 8 - 1] = 1ULL << 63;
	ms_empty();
	ck_assert_int_eq(mig_out_open(&o, sfd, MS_RAM, IMG_CODEC_NONE, 0), 0);
	ck_assert_int_eq(mig_send_plan(&o, bits, len - 8), -EINVAL);
	ck_assert_int_eq(mig_send_plan(&o, bits, len), 0);
	mig_out_close(&o);
	ck_assert_int_eq(write(sfd, &f, sizeof(f)), (ssize_t)sizeof(f));
	ck_assert_int_eq(write(sfd, bits, 8), 8);
	ck_assert_int_eq(lseek(sfd, 0, SEEK_SET), 0);
	ck_assert_int_eq(mig_in_open(&in, sfd, dst, MS_RAM, NULL, err, sizeof(err)), 0);
	ck_assert_msg(mig_next(&in, &ev, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(ev.type, MIG_PLAN);
	ck_assert_uint_eq(ev.len, len);
	ck_assert(memcmp(ev.data, bits, len) == 0);
	free(ev.data);
	ck_assert_int_eq(mig_next(&in, &ev, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "a plan of 8 bytes"));
	mig_in_close(&in);
	free(bits);
}
END_TEST

/* A source that goes silent mid-stream: with the peer bound set (1 s), the destination's
 * read ends with -ETIMEDOUT and a reason that says the source sent nothing for 1 s,
 * instead of waiting forever; without a bound the same read would block. A pipe takes
 * no bound and is left as it is. */
START_TEST(test_silent_source)
{
	struct mig_out o;
	struct mig_in in;
	struct mig_event ev;
	char err[256] = "";
	int sv[2], pfd[2], rc;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(mig_bound(sv[1], 1), 0);
	ck_assert_uint_eq(mig_bound_s(sv[1]), 1);
	ck_assert_int_eq(mig_out_open(&o, sv[0], MS_RAM, IMG_CODEC_NONE, 0), 0);
	ck_assert_int_eq(mig_send_round(&o, 0), 0);
	ck_assert_int_eq(mig_flush(&o), 0);
	ck_assert_int_eq(mig_in_open(&in, sv[1], dst, MS_RAM, NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(mig_next(&in, &ev, err, sizeof(err)), 0);
	ck_assert_int_eq(ev.type, MIG_ROUND);
	rc = mig_next(&in, &ev, err, sizeof(err)); /* nothing more comes */
	ck_assert_msg(rc == -ETIMEDOUT && strstr(err, "the source sent nothing for 1 s"),
		      "rc %d, '%s'", rc, err);
	mig_in_close(&in);
	mig_out_close(&o);
	close(sv[0]);
	close(sv[1]);
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	ck_assert_int_eq(mig_bound(pfd[0], 1), 0);
	ck_assert_uint_eq(mig_bound_s(pfd[0]), 0);
	close(pfd[0]);
	close(pfd[1]);
}
END_TEST

/* A destination that takes nothing: once the socket's buffer is full, the source's
 * write ends with -ETIMEDOUT at the bound rather than blocking for good. */
START_TEST(test_stuck_destination)
{
	struct mig_out o;
	int sv[2], rc = 0;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(mig_bound(sv[0], 1), 0);
	ck_assert_int_eq(mig_out_open(&o, sv[0], MS_RAM, IMG_CODEC_NONE, 0), 0);
	for (int i = 0; i < 64 && !rc; i++) /* 512 MiB: far more than a socket buffers */
		rc = mig_send_memory(&o, src, 0, MS_RAM);
	if (!rc)
		rc = mig_flush(&o);
	ck_assert_int_eq(rc, -ETIMEDOUT);
	mig_out_close(&o);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* The destination's BUSY (at long work, alive) reads back as such, on both of the
 * source's readers, and is told apart from a code past the last one. */
START_TEST(test_busy_ack)
{
	enum mig_ack_code code;
	char why[MIG_WHY_MAX];
	uint64_t gpa;

	ms_empty();
	ck_assert_int_eq(mig_send_ack(sfd, MIG_ACK_BUSY, NULL), 0);
	ck_assert_int_eq(mig_send_ack(sfd, MIG_ACK_BUSY + 1, NULL), 0);
	ck_assert_int_eq(lseek(sfd, 0, SEEK_SET), 0);
	ck_assert_int_eq(mig_read_ack(sfd, &code, why), 0);
	ck_assert_int_eq(code, MIG_ACK_BUSY);
	ck_assert_int_eq(mig_read_msg(sfd, MS_RAM, &code, &gpa, why), -EPROTO);
}
END_TEST

Suite *migstream_suite(void)
{
	Suite *s = suite_create("migstream");
	TCase *tc = tcase_create("stream");

	tcase_add_checked_fixture(tc, ms_setup, ms_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_damaged_byte);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_section_types);
	tcase_add_test(tc, test_plan);
	tcase_add_test(tc, test_silent_source);
	tcase_add_test(tc, test_stuck_destination);
	tcase_add_test(tc, test_busy_ack);
	suite_add_tcase(s, tc);
	return s;
}
