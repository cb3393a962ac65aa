/*
 * migstream.c - the live-migration stream: frames of guest memory and state sections
 * over a socket (docs/migration.md, "The stream").
 *
 * The stream is an image in motion: what an image stores as chunks and sections travels
 * as frames, each with the XXH3 checksum of its raw bytes and the codec it is stored
 * with, and the destination checks every frame as restore checks an image before a byte
 * of it reaches guest memory: its type, codec, place and sizes against the RAM the
 * stream announced, then its checksum once decompressed. A checksum finds damage, not
 * tampering: the stream is data, never policy (the destination's own command line sets
 * the guest's confinement), and the parser is fuzzed (tests/fuzz/fuzz_migstream.c).
 *
 * Memory goes as runs of pages: zero pages as holes with no payload, the others
 * compressed when the codec saves bytes. A section longer than a frame is split into
 * frames in order, each naming the whole length, and joined by the receiver.
 */
#include "migstream.h"
#include "image.h"
#include "../base/bits.h"
#include "../base/log.h"
#include "../base/pages.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <xxhash.h>

#define MIG_PROBE (64ULL << 10) /* bytes auto tries LZ4 on first */

/* ---- the peer's time bound ---- */

int mig_bound(int fd, unsigned seconds)
{
	struct timeval tv = { .tv_sec = seconds };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return errno == ENOTSOCK ? 0 : -errno; /* a pipe (tests): no bound */
	return 0;
}

unsigned mig_bound_s(int fd)
{
	struct timeval tv = { 0 };
	socklen_t len = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) < 0)
		return 0;
	return (unsigned)tv.tv_sec;
}

/* Why a read or write of @n bytes (0 or less) moved nothing: @eof at the peer's end;
 * -ETIMEDOUT when it waited out the bound (the socket says EAGAIN), not a cut. */
static int mig_io_err(ssize_t n, int eof)
{
	if (n == 0)
		return eof;
	return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
}

/* Why the stream stopped @where ("before its end"): its end, or a source silent for
 * the whole bound. */
static int mig_cut(const struct mig_in *in, int rc, char *err, size_t errlen, const char *where)
{
	if (rc == -ETIMEDOUT)
		return log_set_err(rc, err, errlen, "the stream stalled %s: the source sent "
				   "nothing for %u s (--peer-timeout)", where, mig_bound_s(in->fd));
	return log_set_err(rc, err, errlen, "the stream ended %s", where);
}

/* ---- the connection: a socket, or a session over it ---- */

/* A few connections at once at most: a migration's, a test's both ends. */
#define MIG_IO_SLOTS 8

static struct {
	int fd;                        /* -1: a free slot */
	const struct mig_io_ops *ops;
	void *ctx;
} mig_io_slots[MIG_IO_SLOTS] = { [0 ... MIG_IO_SLOTS - 1] = { .fd = -1 } };
static pthread_mutex_t mig_io_lock = PTHREAD_MUTEX_INITIALIZER;

int mig_io_attach(int fd, const struct mig_io_ops *ops, void *ctx)
{
	int rc = -EBUSY;

	pthread_mutex_lock(&mig_io_lock);
	for (int i = 0; i < MIG_IO_SLOTS && rc; i++)
		if (mig_io_slots[i].fd < 0) {
			mig_io_slots[i].ops = ops;
			mig_io_slots[i].ctx = ctx;
			mig_io_slots[i].fd = fd;
			rc = 0;
		}
	pthread_mutex_unlock(&mig_io_lock);
	return rc;
}

void mig_io_detach(int fd)
{
	pthread_mutex_lock(&mig_io_lock);
	for (int i = 0; i < MIG_IO_SLOTS; i++)
		if (mig_io_slots[i].fd == fd)
			mig_io_slots[i].fd = -1;
	pthread_mutex_unlock(&mig_io_lock);
}

/* The session carrying @fd's bytes: NULL for a plain socket. */
static const struct mig_io_ops *mig_io_find(int fd, void **ctx)
{
	const struct mig_io_ops *ops = NULL;

	pthread_mutex_lock(&mig_io_lock);
	for (int i = 0; i < MIG_IO_SLOTS && !ops; i++)
		if (mig_io_slots[i].fd == fd) {
			ops = mig_io_slots[i].ops;
			*ctx = mig_io_slots[i].ctx;
		}
	pthread_mutex_unlock(&mig_io_lock);
	return ops;
}

ssize_t mig_io_read(int fd, void *buf, size_t len)
{
	void *ctx;
	const struct mig_io_ops *ops = mig_io_find(fd, &ctx);

	return ops ? ops->read(ctx, buf, len) : read(fd, buf, len);
}

ssize_t mig_io_write(int fd, const void *buf, size_t len)
{
	void *ctx;
	const struct mig_io_ops *ops = mig_io_find(fd, &ctx);

	return ops ? ops->write(ctx, buf, len) : write(fd, buf, len);
}

bool mig_io_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	void *ctx;
	const struct mig_io_ops *ops = mig_io_find(fd, &ctx);

	return (ops && ops->pending(ctx)) || poll(&pfd, 1, 0) == 1;
}

static int mig_write_all(int fd, const void *buf, size_t len, uint64_t *count)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = mig_io_write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return mig_io_err(n, -EPIPE);
		p += n;
		len -= (size_t)n;
		*count += (uint64_t)n;
	}
	return 0;
}

/* Exactly @len bytes: 0, -ECONNRESET when the stream ends first, -errno. */
static int mig_read_all(int fd, void *buf, size_t len, uint64_t *count)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = mig_io_read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return mig_io_err(n, -ECONNRESET);
		p += n;
		len -= (size_t)n;
		*count += (uint64_t)n;
	}
	return 0;
}

/* A bit per page, in words of 64. */
static uint64_t mig_bitmap_bytes(uint64_t ram_size)
{
	return (ram_size / PAGE_SIZE + 63) / 64 * 8;
}

int mig_out_open(struct mig_out *o, int fd, uint64_t ram_size, enum img_codec codec, int level)
{
	struct mig_hello h = { .version = MIG_VERSION, .ram_size = ram_size };

	memset(o, 0, sizeof(*o));
	if (codec > IMG_CODEC_AUTO || ram_size % PAGE_SIZE)
		return -EINVAL;
	o->fd = fd;
	o->probe = codec == IMG_CODEC_AUTO;
	o->codec = o->probe ? IMG_CODEC_LZ4 : codec;
	o->level = o->probe ? codec_default_level(IMG_CODEC_LZ4) : level;
	o->ram_size = ram_size;
	o->scratch = malloc(codec_bound(MIG_FRAME_MAX));
	o->buf = malloc(MIG_IO_BUF);
	if (!o->scratch || !o->buf) {
		mig_out_close(o);
		return -ENOMEM;
	}
	memcpy(h.magic, MIG_MAGIC, sizeof(h.magic));
	return mig_write_all(fd, &h, sizeof(h), &o->bytes_sent);
}

void mig_out_close(struct mig_out *o)
{
	free(o->scratch);
	free(o->buf);
	o->scratch = o->buf = NULL;
	o->buffered = 0;
}

int mig_flush(struct mig_out *o)
{
	size_t n = o->buffered;

	o->buffered = 0;
	return n ? mig_write_all(o->fd, o->buf, n, &o->bytes_sent) : 0;
}

/* A frame into the buffer; a payload the buffer cannot hold goes straight after it. */
static int mig_frame_out(struct mig_out *o, const struct mig_frame *f, const void *payload)
{
	size_t whole = sizeof(*f) + f->len;
	int rc = o->buffered + (whole <= MIG_IO_BUF ? whole : sizeof(*f)) > MIG_IO_BUF ?
			 mig_flush(o) : 0;

	if (rc)
		return rc;
	memcpy(o->buf + o->buffered, f, sizeof(*f));
	o->buffered += sizeof(*f);
	if (whole > MIG_IO_BUF) {
		rc = mig_flush(o);
		return rc ? rc : mig_write_all(o->fd, payload, f->len, &o->bytes_sent);
	}
	if (f->len)
		memcpy(o->buf + o->buffered, payload, f->len);
	o->buffered += f->len;
	return 0;
}

/* Under auto: LZ4 shrinks the first MIG_PROBE bytes of @src by an eighth (else the
 * frame goes raw: compressing what does not shrink only slows the stream). */
static bool mig_worth_compressing(struct mig_out *o, const uint8_t *src, uint64_t len)
{
	uint64_t n = len < MIG_PROBE ? len : MIG_PROBE;
	ssize_t got = codec_compress(IMG_CODEC_LZ4, o->level, src, n, o->scratch,
				     codec_bound(MIG_FRAME_MAX));

	return got > 0 && (uint64_t)got < n - n / 8;
}

/* Pages [at, at + len) of @src (len at most a frame), compressed when that saves. */
static int mig_send_run(struct mig_out *o, const uint8_t *src, uint64_t at, uint64_t len)
{
	struct mig_frame f = { .type = MIG_PAGES, .codec = IMG_CODEC_NONE, .at = at, .len = len,
			       .raw_len = len, .sum = XXH3_64bits(src, len) };
	const void *payload = src;

	if (o->codec != IMG_CODEC_NONE && (!o->probe || mig_worth_compressing(o, src, len))) {
		ssize_t n = codec_compress(o->codec, o->level, src, len, o->scratch,
					   codec_bound(MIG_FRAME_MAX));

		if (n > 0 && (uint64_t)n < len) {
			f.codec = o->codec;
			f.len = (uint64_t)n;
			payload = o->scratch;
		}
	}
	o->pages_sent += len / PAGE_SIZE;
	return mig_frame_out(o, &f, payload);
}

static bool mig_zero_page(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)p;

	for (size_t i = 0; i < PAGE_SIZE / sizeof(*q); i++)
		if (q[i])
			return false;
	return true;
}

int mig_send_memory(struct mig_out *o, const uint8_t *mem, uint64_t gpa, uint64_t len)
{
	return mig_send_pages(o, mem + gpa, gpa, len);
}

int mig_send_pages(struct mig_out *o, const uint8_t *data, uint64_t gpa, uint64_t len)
{
	int rc = 0;

	if (gpa % PAGE_SIZE || len % PAGE_SIZE || gpa > o->ram_size || len > o->ram_size - gpa)
		return -EINVAL;
	/* Runs of zero pages and of data pages, each cut at a frame's size. */
	for (uint64_t off = 0; off < len && !rc;) {
		bool zero = mig_zero_page(data + off);
		uint64_t run = PAGE_SIZE;

		while (off + run < len && run < MIG_FRAME_MAX &&
		       mig_zero_page(data + off + run) == zero)
			run += PAGE_SIZE;
		if (zero) {
			struct mig_frame f = { .type = MIG_HOLES, .at = gpa + off, .raw_len = run };

			o->holes_sent += run / PAGE_SIZE;
			rc = mig_frame_out(o, &f, NULL);
		} else {
			rc = mig_send_run(o, data + off, gpa + off, run);
		}
		off += run;
	}
	return rc;
}

static int mig_send_joined(struct mig_out *o, uint32_t kind, uint32_t type, const void *data,
			   size_t len);

int mig_send_section(struct mig_out *o, uint32_t type, const void *data, size_t len)
{
	return mig_send_joined(o, MIG_SECTION, type, data, len);
}

int mig_send_postcopy(struct mig_out *o, const uint64_t *stale, size_t len)
{
	int rc = len && len != mig_bitmap_bytes(o->ram_size) ? -EINVAL :
			 mig_send_joined(o, MIG_POSTCOPY, 0, stale, len);

	return rc ? rc : mig_flush(o);
}

int mig_send_plan(struct mig_out *o, const uint64_t *pages, size_t len)
{
	int rc = len != mig_bitmap_bytes(o->ram_size) ? -EINVAL :
			 mig_send_joined(o, MIG_PLAN, 0, pages, len);

	return rc ? rc : mig_flush(o);
}

/* Bytes that travel as frames of @kind in order, each naming the whole length. */
static int mig_send_joined(struct mig_out *o, uint32_t kind, uint32_t type, const void *data,
			   size_t len)
{
	const uint8_t *p = data;
	size_t done = 0;
	int rc = 0;

	if (len > MIG_SECTION_MAX)
		return -E2BIG;
	do {
		size_t n = len - done < MIG_FRAME_MAX ? len - done : MIG_FRAME_MAX;
		struct mig_frame f = { .type = kind, .at = type, .len = n, .raw_len = n,
				       .sum = XXH3_64bits(p + done, n), .total = len };

		rc = mig_frame_out(o, &f, p + done);
		done += n;
	} while (!rc && done < len);
	return rc;
}

int mig_send_round(struct mig_out *o, uint64_t round)
{
	struct mig_frame f = { .type = MIG_ROUND, .at = round };

	return mig_frame_out(o, &f, NULL);
}

int mig_send_end(struct mig_out *o)
{
	struct mig_frame f = { .type = MIG_END };
	int rc = mig_frame_out(o, &f, NULL);

	return rc ? rc : mig_flush(o);
}

/* ---- receiving ---- */

int mig_in_open(struct mig_in *in, int fd, uint8_t *mem, uint64_t ram_size, uint64_t *got,
		char *err, size_t errlen)
{
	struct mig_hello h;
	int rc;

	memset(in, 0, sizeof(*in));
	in->fd = fd;
	in->mem = mem;
	rc = mig_read_all(fd, &h, sizeof(h), &in->bytes_read);
	if (rc)
		return mig_cut(in, rc, err, errlen, "before its first bytes");
	if (memcmp(h.magic, MIG_MAGIC, sizeof(h.magic)))
		return log_set_err(-EPROTO, err, errlen, "not a ccvm migration stream");
	if (h.version != MIG_VERSION || h.flags)
		return log_set_err(-EPROTO, err, errlen, "stream version %u: this ccvm takes %d",
				   h.version, MIG_VERSION);
	if (!h.ram_size || h.ram_size % PAGE_SIZE || (ram_size && h.ram_size != ram_size))
		return log_set_err(-EPROTO, err, errlen, "a stream of %llu bytes of RAM, not %llu",
				   (unsigned long long)h.ram_size, (unsigned long long)ram_size);
	in->ram_size = h.ram_size;
	if (got)
		*got = h.ram_size;
	in->raw = malloc(MIG_FRAME_MAX);
	in->stored = malloc(MIG_FRAME_MAX);
	in->buf = malloc(MIG_IO_BUF);
	if (!in->raw || !in->stored || !in->buf) {
		mig_in_close(in);
		return -ENOMEM;
	}
	return 0;
}

void mig_in_close(struct mig_in *in)
{
	free(in->raw);
	free(in->stored);
	free(in->buf);
	in->raw = in->stored = in->buf = NULL;
	in->at = in->end = 0;
}

/* Exactly @len bytes of the stream, through the read-ahead: 0, -ECONNRESET when it
 * ends first, -errno. What the buffer would not hold is read straight. */
static int mig_in_read(struct mig_in *in, void *dst, size_t len)
{
	uint8_t *p = dst;

	while (len) {
		size_t take;

		if (in->at == in->end) {
			ssize_t n;

			if (len >= MIG_IO_BUF)
				return mig_read_all(in->fd, p, len, &in->bytes_read);
			n = mig_io_read(in->fd, in->buf, MIG_IO_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return mig_io_err(n, -ECONNRESET);
			in->at = 0;
			in->end = (size_t)n;
			in->bytes_read += (uint64_t)n;
		}
		take = len < in->end - in->at ? len : in->end - in->at;
		memcpy(p, in->buf + in->at, take);
		in->at += take;
		p += take;
		len -= take;
	}
	return 0;
}

/* The header's own checks: what each type may carry, within the announced RAM. */
static int mig_frame_ok(const struct mig_in *in, const struct mig_frame *f, char *err,
			size_t errlen)
{
	bool memory = f->type == MIG_PAGES || f->type == MIG_HOLES;
	bool joined = f->type == MIG_SECTION || f->type == MIG_POSTCOPY || f->type == MIG_PLAN;
	bool payload = f->type == MIG_PAGES || joined;

	if (f->type < MIG_PAGES || f->type > MIG_PLAN)
		return log_set_err(-EPROTO, err, errlen, "frame type %u unknown", f->type);
	if (f->codec >= IMG_CODEC_AUTO || (f->codec && f->type != MIG_PAGES))
		return log_set_err(-EPROTO, err, errlen, "frame codec %u not one ccvm sends",
				   f->codec);
	if (!payload && (f->len || f->sum))
		return log_set_err(-EPROTO, err, errlen, "a frame of type %u with a payload",
				   f->type);
	if (f->len > MIG_FRAME_MAX || f->raw_len > MIG_FRAME_MAX ||
	    (!f->codec && payload && f->len != f->raw_len))
		return log_set_err(-EPROTO, err, errlen, "a frame of %llu bytes (%llu raw)",
				   (unsigned long long)f->len, (unsigned long long)f->raw_len);
	if (memory && (!f->raw_len || f->at % PAGE_SIZE || f->raw_len % PAGE_SIZE ||
		       f->at > in->ram_size || f->raw_len > in->ram_size - f->at))
		return log_set_err(-EPROTO, err, errlen, "memory [%#llx, +%#llx) outside the RAM",
				   (unsigned long long)f->at, (unsigned long long)f->raw_len);
	if (joined && (f->total > MIG_SECTION_MAX || f->raw_len > f->total))
		return log_set_err(-EPROTO, err, errlen, "a section of %llu bytes",
				   (unsigned long long)f->total);
	/* A section is an image's: of a type an image holds (a type past 32 bits would
	 * also pass for another at the receiver's "sent twice" check), within what an
	 * image of this RAM may hold of it. */
	if (f->type == MIG_SECTION && (f->at < IMG_SEC_VCPUS || f->at > IMG_SEC_LAST))
		return log_set_err(-EPROTO, err, errlen, "a section of unknown type %llu",
				   (unsigned long long)f->at);
	if (f->type == MIG_SECTION && f->total > img_section_max((uint32_t)f->at, in->ram_size))
		return log_set_err(-EPROTO, err, errlen, "a section of type %llu and %llu bytes, "
				   "more than an image of %llu MiB of RAM may hold (%llu)",
				   (unsigned long long)f->at, (unsigned long long)f->total,
				   (unsigned long long)(in->ram_size >> 20),
				   (unsigned long long)img_section_max((uint32_t)f->at,
								       in->ram_size));
	if (f->type == MIG_POSTCOPY && f->total && f->total != mig_bitmap_bytes(in->ram_size))
		return log_set_err(-EPROTO, err, errlen, "a post-copy bitmap of %llu bytes",
				   (unsigned long long)f->total);
	if (f->type == MIG_PLAN && f->total != mig_bitmap_bytes(in->ram_size))
		return log_set_err(-EPROTO, err, errlen, "a plan of %llu bytes",
				   (unsigned long long)f->total);
	if (!joined && f->total)
		return log_set_err(-EPROTO, err, errlen, "a frame of type %u naming a length",
				   f->type);
	return 0;
}

/* Frame @f's payload read, decompressed into in->raw and checked. */
static int mig_payload(struct mig_in *in, const struct mig_frame *f, char *err, size_t errlen)
{
	int rc = mig_in_read(in, f->codec ? in->stored : in->raw, f->len);

	if (rc)
		return mig_cut(in, rc, err, errlen, "inside a frame");
	if (f->codec && codec_decompress(f->codec, in->stored, f->len, in->raw, f->raw_len))
		return log_set_err(-EPROTO, err, errlen, "a frame that does not decompress");
	if (XXH3_64bits(in->raw, f->raw_len) != f->sum)
		return log_set_err(-EPROTO, err, errlen, "a frame at %#llx fails its checksum: "
				   "the stream is damaged", (unsigned long long)f->at);
	return 0;
}

/* A section's frames joined into ev->data. */
static int mig_section(struct mig_in *in, struct mig_frame *f, struct mig_event *ev, char *err,
		       size_t errlen)
{
	uint64_t total = f->total, done = 0, type = f->at;
	uint32_t kind = f->type;
	int rc = 0;

	ev->data = malloc(total ? total : 1);
	if (!ev->data)
		return -ENOMEM;
	for (;;) {
		rc = mig_payload(in, f, err, errlen);
		if (rc)
			break;
		memcpy(ev->data + done, in->raw, f->raw_len);
		done += f->raw_len;
		if (done == total)
			break;
		rc = mig_in_read(in, f, sizeof(*f));
		if (rc) {
			mig_cut(in, rc, err, errlen, "inside a section");
			break;
		}
		rc = mig_frame_ok(in, f, err, errlen);
		if (!rc && (f->type != kind || f->at != type || f->total != total ||
			    !f->raw_len || f->raw_len > total - done))
			rc = log_set_err(-EPROTO, err, errlen, "a section's frames out of order");
		if (rc)
			break;
	}
	if (rc) {
		free(ev->data);
		ev->data = NULL;
		return rc;
	}
	ev->len = total;
	return 0;
}

/* Checked memory into place: the install hook's, or the memory itself. */
static int mig_land(struct mig_in *in, uint64_t gpa, const uint8_t *data, uint64_t len)
{
	if (in->install)
		return in->install(in->install_ctx, gpa, data, len);
	if (data)
		memcpy(in->mem + gpa, data, len);
	else
		memset(in->mem + gpa, 0, len);
	if (in->have)
		bits_set(in->have, gpa / PAGE_SIZE, len / PAGE_SIZE);
	return 0;
}

int mig_next(struct mig_in *in, struct mig_event *ev, char *err, size_t errlen)
{
	struct mig_frame f;
	int rc = mig_in_read(in, &f, sizeof(f));

	memset(ev, 0, sizeof(*ev));
	if (rc)
		return mig_cut(in, rc, err, errlen, "before its end");
	rc = mig_frame_ok(in, &f, err, errlen);
	if (rc)
		return rc;
	ev->type = (enum mig_frame_type)f.type;
	ev->at = f.at;
	switch (f.type) {
	case MIG_PAGES:
		rc = mig_payload(in, &f, err, errlen);
		ev->len = f.raw_len;
		return rc ? rc : mig_land(in, f.at, in->raw, f.raw_len);
	case MIG_HOLES:
		ev->len = f.raw_len;
		return mig_land(in, f.at, NULL, f.raw_len);
	case MIG_SECTION:
	case MIG_POSTCOPY:
	case MIG_PLAN:
		if (!f.total) {
			ev->data = malloc(1); /* an empty section: nothing to read */
			return ev->data ? 0 : -ENOMEM;
		}
		if (!f.raw_len)
			return log_set_err(-EPROTO, err, errlen, "an empty frame of a section");
		return mig_section(in, &f, ev, err, errlen);
	default:
		return 0;
	}
}

/* ---- the destination's answers ---- */

struct mig_ack {
	char magic[8];
	uint32_t code;
	uint32_t len;            /* of why, NUL excluded */
	uint64_t at;             /* MIG_ACK_PAGE: the block asked for */
	char why[MIG_WHY_MAX];
};

int mig_send_ack(int fd, enum mig_ack_code code, const char *why)
{
	struct mig_ack a = { .code = code };
	uint64_t n = 0;

	memcpy(a.magic, MIG_ACK_MAGIC, sizeof(a.magic));
	snprintf(a.why, sizeof(a.why), "%s", why ? why : "");
	a.len = (uint32_t)strlen(a.why);
	return mig_write_all(fd, &a, sizeof(a), &n);
}

int mig_send_request(int fd, uint64_t gpa)
{
	struct mig_ack a = { .code = MIG_ACK_PAGE, .at = gpa };
	uint64_t n = 0;

	memcpy(a.magic, MIG_ACK_MAGIC, sizeof(a.magic));
	return mig_write_all(fd, &a, sizeof(a), &n);
}

int mig_read_msg(int fd, uint64_t ram_size, enum mig_ack_code *code, uint64_t *gpa,
		 char why[MIG_WHY_MAX])
{
	struct mig_ack a;
	uint64_t n = 0;
	int rc = mig_read_all(fd, &a, sizeof(a), &n);

	why[0] = '\0';
	if (rc)
		return rc;
	if (memcmp(a.magic, MIG_ACK_MAGIC, sizeof(a.magic)) || a.code < MIG_ACK_READY ||
	    a.code > MIG_ACK_BUSY || a.len >= MIG_WHY_MAX || memchr(a.why, '\0', a.len))
		return -EPROTO;
	if (a.code == MIG_ACK_PAGE && (a.at % MIG_BLOCK || a.at >= ram_size))
		return -EPROTO;
	memcpy(why, a.why, a.len);
	why[a.len] = '\0';
	*code = (enum mig_ack_code)a.code;
	*gpa = a.at;
	return 0;
}

int mig_read_ack(int fd, enum mig_ack_code *code, char why[MIG_WHY_MAX])
{
	uint64_t gpa;
	int rc = mig_read_msg(fd, UINT64_MAX, code, &gpa, why);

	return !rc && (*code == MIG_ACK_PAGE || *code == MIG_ACK_DONE) ? -EPROTO : rc;
}
