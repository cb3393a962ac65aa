/*
 * imgstream.c - the end-to-end suite's sender of a migration stream made of an image:
 * every chunk through ccvm's image reader (checked), then the state sections, over the
 * stream (snapshot/migstream.c) to a destination `ccvm restore --incoming unix:PATH`;
 * it prints the destination's answers. With --damage, one byte of the first frame
 * with a payload is flipped on the way, as a damaged link would. The stream's sender
 * is the source ccvm's to be (docs/migration.md); this drives its receiver now.
 *
 * Usage: imgstream [--damage] IMAGE unix:PATH
 */
#include "../../snapshot/image.h"
#include "../../snapshot/migstream.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

#define WINDOW_REC (8 + (2u << 20)) /* a window record: its place, then a 2 MiB block */

/* The windows section a record (a block and its place) at a time, as ccvm sends it: a
 * tree's memory is larger than a section may be. */
static int send_windows(struct mig_out *o, const struct img_reader *r, const struct img_section *s)
{
	const size_t rec = WINDOW_REC;
	uint8_t *buf = malloc(rec);
	int rc = buf ? 0 : -ENOMEM;

	for (uint64_t off = 0; !rc && off + rec <= s->length; off += rec) {
		rc = img_read_at(r, s, off, buf, rec) ? -EIO : 0;
		if (!rc)
			rc = mig_send_section(o, IMG_SEC_WINDOWS, buf, rec);
	}
	free(buf);
	return rc;
}

/* The sections an image keeps for itself: its chunks' checksums and encodings, an
 * incremental image's lineage, and where the pages written after round 0's frames
 * stand (the reader lays them over the chunks it sends). */
static bool own_section(uint32_t type)
{
	return type == IMG_SEC_CHUNKS || type == IMG_SEC_ENCODING || type == IMG_SEC_PARENT ||
	       type == IMG_SEC_PAGEMASK || type == IMG_SEC_PATCHES;
}

static int connect_unix(const char *where)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || strncmp(where, "unix:", 5) || strlen(where + 5) >= sizeof(un.sun_path))
		return -EINVAL;
	strcpy(un.sun_path, where + 5);
	for (int tries = 0; tries < 100; tries++) { /* the destination may still be starting */
		if (connect(fd, (struct sockaddr *)&un, sizeof(un)) == 0)
			return fd;
		usleep(100000);
	}
	close(fd);
	return -errno;
}

/* A raw frame of the chunk at @at whose checksum is the chunk's, one byte of it
 * flipped after the checksum was taken, as a damaged link would. */
static int send_damaged(int fd, uint8_t *buf, uint64_t at)
{
	struct mig_frame f = { .type = MIG_PAGES, .codec = IMG_CODEC_NONE, .at = at,
			       .len = IMG_CHUNK, .raw_len = IMG_CHUNK,
			       .sum = XXH3_64bits(buf, IMG_CHUNK) };

	buf[IMG_CHUNK / 2] ^= 0x5a;
	if (write(fd, &f, sizeof(f)) != (ssize_t)sizeof(f))
		return -EIO;
	for (size_t done = 0; done < IMG_CHUNK;) {
		ssize_t n = write(fd, buf + done, IMG_CHUNK - done);

		if (n <= 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

static int send_image(struct mig_out *o, const struct img_reader *r, uint8_t *buf, bool damage)
{
	int rc = 0;

	for (uint64_t c = 0; c < r->n_chunks && !rc; c++) {
		bool data;

		rc = img_load_chunk(r, c, buf, &data);
		if (!rc && !data)
			memset(buf, 0, IMG_CHUNK);
		if (!rc && damage && data) {
			rc = mig_flush(o); /* the frames before it go first */
			rc = rc ? rc : send_damaged(o->fd, buf, c * IMG_CHUNK);
			damage = false;
			continue;
		}
		if (!rc)
			rc = mig_send_pages(o, buf, c * IMG_CHUNK, IMG_CHUNK);
	}
	for (int i = 0; i < r->n_sections && !rc; i++) {
		void *data = NULL;

		if (own_section(r->sec[i].type))
			continue;
		if (r->sec[i].type == IMG_SEC_WINDOWS) {
			rc = send_windows(o, r, &r->sec[i]);
			continue;
		}
		if (r->sec[i].length && img_read_section(r, &r->sec[i], &data))
			return -EIO;
		rc = mig_send_section(o, r->sec[i].type, data, r->sec[i].length);
		free(data);
	}
	return rc ? rc : mig_send_end(o);
}

int main(int argc, char **argv)
{
	static const char *names[] = { "?", "READY", "RUNNING", "REFUSED" };
	bool damage = argc == 4 && strcmp(argv[1], "--damage") == 0;
	struct img_reader r;
	struct mig_out o;
	char err[IMG_ERR_LEN], why[MIG_WHY_MAX];
	enum mig_ack_code code;
	uint8_t *buf;
	int fd, rc;

	if (argc != 3 + damage) {
		fprintf(stderr, "usage: imgstream [--damage] IMAGE unix:PATH\n");
		return 2;
	}
	if (img_open(argv[1 + damage], &r, err)) {
		fprintf(stderr, "imgstream: %s\n", err);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN); /* a refusal closes the connection under a write */
	fd = connect_unix(argv[2 + damage]);
	buf = malloc(IMG_CHUNK);
	rc = fd < 0 ? fd : !buf ? -ENOMEM :
	     mig_out_open(&o, fd, r.info.ram_size, IMG_CODEC_LZ4, codec_default_level(IMG_CODEC_LZ4));
	if (!rc) {
		rc = send_image(&o, &r, buf, damage);
		printf("sent %llu bytes\n", (unsigned long long)o.bytes_sent);
		mig_out_close(&o);
	}
	/* A destination that refused closed its end: its answer is still there to read. */
	while (fd >= 0 && mig_read_ack(fd, &code, why) == 0) {
		printf("%s%s%s\n", names[code], why[0] ? ": " : "", why);
		if (code != MIG_ACK_READY)
			break;
	}
	if (rc)
		fprintf(stderr, "imgstream: %s\n", strerror(-rc));
	free(buf);
	img_close(&r);
	return rc ? 1 : 0;
}
