/*
 * migstream.h - the live-migration stream (docs/migration.md): guest memory and state
 * sections as checksummed, optionally compressed frames over a socket, written by the
 * source and checked by the destination as an image is (snapshot/migstream.c).
 */
#ifndef CCVM_MIGSTREAM_H
#define CCVM_MIGSTREAM_H

#include "codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MIG_MAGIC       "CCVMMIG1"
#define MIG_VERSION     2 /* 2: the destination's BUSY while it works (mig_ack_code) */
#define MIG_FRAME_MAX   (2ULL << 20) /* a frame's bytes at most, raw or stored */
#define MIG_SECTION_MAX (64ULL << 20) /* a state section's bytes at most */
/* Frames are gathered into writes, and read ahead, this much at a time: scattered
 * pages travel as a frame each, and a system call per header and per page doubled the
 * pause's time a page. */
#define MIG_IO_BUF      (256ULL << 10)

/* Numbers are on the wire: never renumber. */
enum mig_frame_type {
	MIG_PAGES = 1,   /* @at: guest-physical address; the bytes of [at, at + raw_len) */
	MIG_HOLES = 2,   /* [at, at + raw_len) reads as zero; no payload */
	MIG_SECTION = 3, /* @at: an image section type (image.h); the section's bytes */
	MIG_ROUND = 4,   /* @at: the pre-copy round that starts; no payload */
	MIG_END = 5,     /* nothing follows; no payload */
	MIG_POSTCOPY = 6, /* the state is all sent: the destination runs now, the pages it
			   * lacks come on request or pushed, then END. Payload (split as a
			   * section's): a bit per page of RAM the destination holds stale */
	MIG_PLAN = 7,    /* before pre-copy's rounds: a bit per page of RAM that they will
			  * send (split as a section's). The destination faults that memory
			  * in, then answers PREPARED: round 0 is not paced by its faults */
};

/* A frame as it travels: this header (little endian, 48 bytes), then @len bytes. */
struct mig_frame {
	uint32_t type;     /* enum mig_frame_type */
	uint32_t codec;    /* how the payload is stored (enum img_codec, none to zstd) */
	uint64_t at;
	uint64_t len;      /* payload bytes as stored */
	uint64_t raw_len;  /* bytes it stands for */
	uint64_t sum;      /* XXH3-64 of the raw bytes (0 for a frame with none) */
	uint64_t total;    /* a section's whole length, in each of its frames, which come
			    * in order; zero for the others */
};

/* The stream's first bytes: magic, version, the RAM it carries. */
struct mig_hello {
	char magic[8];
	uint32_t version;
	uint32_t flags;    /* zero */
	uint64_t ram_size;
};

/* The sending side: an fd (socket or pipe), the codec for memory frames, counters. */
struct mig_out {
	int fd;
	enum img_codec codec;
	int level;
	bool probe;            /* auto: LZ4 where a probe of the frame shrinks */
	uint64_t ram_size;
	uint64_t bytes_sent;   /* on the wire, headers included */
	uint64_t pages_sent, holes_sent;
	uint8_t *scratch;      /* MIG_FRAME_MAX bound for a compressed frame */
	uint8_t *buf;          /* frames gathered for one write (MIG_IO_BUF) */
	size_t buffered;
};

/* The receiving side: where memory goes, and what it has seen. */
struct mig_in {
	int fd;
	uint8_t *mem;          /* guest memory of ram_size bytes, written by pages and holes */
	uint64_t *have;        /* optional: a bit per page, set as pages and holes land */
	/* Post-copy: memory frames go through this instead (@data NULL: zeros). */
	int (*install)(void *ctx, uint64_t gpa, const uint8_t *data, uint64_t len);
	void *install_ctx;
	uint64_t ram_size;
	uint64_t bytes_read;
	uint8_t *raw, *stored; /* MIG_FRAME_MAX each */
	uint8_t *buf;          /* bytes read ahead (MIG_IO_BUF): [at, end) not yet taken */
	size_t at, end;
};

/* Start a stream on @fd for memory of @ram_size bytes: the hello is written. 0, -errno
 * (the peer went away: -EPIPE). @codec IMG_CODEC_AUTO: LZ4 for each frame whose first
 * 64 KiB it shrinks by an eighth, raw for the others. */
int mig_out_open(struct mig_out *o, int fd, uint64_t ram_size, enum img_codec codec, int level);
void mig_out_close(struct mig_out *o);

/* [gpa, gpa + len) of @mem (page aligned, inside the RAM): frames of at most
 * MIG_FRAME_MAX, a run of zero pages as a hole, the others compressed when that saves
 * bytes. 0 or -errno. mig_send_pages: the same from @data, the bytes of that range. */
int mig_send_memory(struct mig_out *o, const uint8_t *mem, uint64_t gpa, uint64_t len);
int mig_send_pages(struct mig_out *o, const uint8_t *data, uint64_t gpa, uint64_t len);
/* A state section (image section @type, at most MIG_SECTION_MAX bytes, split into frames
 * the receiver joins), a round marker, the end. 0 or -errno. */
int mig_send_section(struct mig_out *o, uint32_t type, const void *data, size_t len);
/* The switch to post-copy, with the bitmap of pages the destination holds stale
 * (@len bytes, 0 or a bit per page of the RAM rounded up to 64). 0 or -errno. */
int mig_send_postcopy(struct mig_out *o, const uint64_t *stale, size_t len);
/* The plan of pre-copy: @len bytes, a bit per page of the RAM rounded up to 64. */
int mig_send_plan(struct mig_out *o, const uint64_t *pages, size_t len);
int mig_send_round(struct mig_out *o, uint64_t round);
int mig_send_end(struct mig_out *o);
/* Frames go out in writes of MIG_IO_BUF: whatever is gathered, written now. The plan,
 * the switch to post-copy and the end write theirs themselves (an answer is awaited
 * after each); so must a caller before it waits for the destination, or writes to the
 * fd itself. 0 or -errno. */
int mig_flush(struct mig_out *o);

/* Read and check the hello from @fd: 0, or -EPROTO (not a ccvm stream, another version,
 * a RAM size other than @ram_size when that is not 0; why in @err), -errno. With
 * @ram_size 0, *@got the stream's. */
int mig_in_open(struct mig_in *in, int fd, uint8_t *mem, uint64_t ram_size, uint64_t *got,
		char *err, size_t errlen);
void mig_in_close(struct mig_in *in);

/* What mig_next hands over besides memory, which it writes itself. */
struct mig_event {
	enum mig_frame_type type;
	uint64_t at;           /* a section's type, a round's number, pages' address */
	uint64_t len;          /* bytes of memory written, or of the section */
	uint8_t *data;         /* a section's bytes (the caller frees them) */
};

/* The next frame, checked before anything is written: pages and holes go into the
 * memory (or through the install hook), a whole section or post-copy bitmap (its
 * frames joined) comes back in @ev. 0, or -EPROTO for a frame ccvm could not have
 * sent (type, codec, place, size, checksum; why in @err), -ECONNRESET when the stream
 * ends before MIG_END, -ETIMEDOUT when the source sent nothing for the bound, -errno. */
int mig_next(struct mig_in *in, struct mig_event *ev, char *err, size_t errlen);

/* The destination's answers, on the same connection: READY once the VM is built from
 * a stream that passed every check, RUNNING as it starts, REFUSED with why. */
enum mig_ack_code { MIG_ACK_READY = 1, MIG_ACK_RUNNING = 2, MIG_ACK_REFUSED = 3,
		   MIG_ACK_PAGE = 4, /* post-copy: the block of MIG_BLOCK bytes at @at, now */
		   MIG_ACK_DONE = 5, /* post-copy: END came, every page is in */
		   MIG_ACK_PREPARED = 6, /* the plan's memory is faulted in: send on */
		   MIG_ACK_BUSY = 7 /* still at work on what the source waits for (a plan's
				     * faulting in): alive, within the peer's time bound */ };
/* A destination at such work says BUSY this often, so that the source's bound on its
 * silence can be far shorter than the work. */
#define MIG_BUSY_EVERY_MS 1000
#define MIG_BLOCK (64ULL << 10)
#define MIG_ACK_MAGIC "CCVMACK1"
#define MIG_WHY_MAX   512

/* The connection under the stream is named by its socket, @fd, everywhere above: a
 * session attached to @fd (TLS, vmm/tls.c) carries every byte read and written on it
 * here, as read(2) and write(2) would (-1 with errno EAGAIN for a bound that ran out,
 * EINTR, or another error; 0 at the end); @pending: bytes it holds already read. The
 * socket stays what is bounded, polled and shut down. 0, or -EBUSY past a few at once.
 * mig_io_readable: whether a read would not wait (post-copy's requests). mig_io_read,
 * mig_io_write: one read(2) or write(2) of the connection, through its session. */
struct mig_io_ops {
	ssize_t (*read)(void *ctx, void *buf, size_t len);
	ssize_t (*write)(void *ctx, const void *buf, size_t len);
	size_t (*pending)(void *ctx);
};
int mig_io_attach(int fd, const struct mig_io_ops *ops, void *ctx);
void mig_io_detach(int fd);
bool mig_io_readable(int fd);
ssize_t mig_io_read(int fd, void *buf, size_t len);
ssize_t mig_io_write(int fd, const void *buf, size_t len);

/* The bound on a peer's silence (--peer-timeout): every read and write on the socket
 * @fd gives up after @seconds in which nothing moved, as -ETIMEDOUT from the calls
 * below (connect too, when set before it). 0 or -errno; nothing for a pipe.
 * mig_bound_s: the bound set on @fd, in seconds (0: none). */
int mig_bound(int fd, unsigned seconds);
unsigned mig_bound_s(int fd);

/* 0 or -errno (-ETIMEDOUT: the peer silent for the bound). mig_read_ack: the next
 * answer (READY, RUNNING, REFUSED, PREPARED, BUSY), @why NUL-terminated; -ECONNRESET
 * when the connection ends first, -EPROTO for anything else (post-copy's requests and
 * DONE included). */
int mig_send_ack(int fd, enum mig_ack_code code, const char *why);
int mig_read_ack(int fd, enum mig_ack_code *code, char why[MIG_WHY_MAX]);
/* Post-copy: a request for the block at @gpa (MIG_BLOCK aligned, inside the RAM of
 * @ram_size bytes when read back); mig_read_msg takes answers and requests alike. */
int mig_send_request(int fd, uint64_t gpa);
int mig_read_msg(int fd, uint64_t ram_size, enum mig_ack_code *code, uint64_t *gpa,
		 char why[MIG_WHY_MAX]);

#endif
