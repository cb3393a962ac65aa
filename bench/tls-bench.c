/*
 * tls-bench.c - what TLS adds to a migration's transfer, without a VM: MEM of guest-like
 * memory sent as a migration stream (snapshot/migstream.c, codec auto, as ctl migrate
 * sends) over loopback TCP to a receiver thread that checks every frame, plain or
 * through a TLS link (vmm/tls.c) with x509 or PSK credentials, then END answered by
 * RUNNING. One line of CSV per transfer: the channel, seconds from the connect to
 * RUNNING (the handshake included), bytes on the wire, and whether the receiver's copy
 * equals the source. bench/tls-cost.sh interleaves the channels over rounds.
 *
 * Usage: tls-bench --creds DIR --channel plain|x509|psk [--mem MiB] [--zero PCT]
 *   DIR as tests/tls/make-creds.sh makes it; --zero: share of zero pages (default 30,
 *   the rest random, which LZ4 cannot shrink: the cipher's worst case).
 */
#include "../vmm/tls.h"
#include "../snapshot/migstream.h"
#include "../base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TB_PAGE      4096u
#define TB_TIMEOUT_S 60

struct tb_dest {
	int lfd;
	const struct tls_creds *c;
	uint8_t *mem;
	uint64_t size;
	int rc;
	char err[512];
};

static double tb_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The stream on @fd: as it is, or over TLS. 0 or -errno. */
static int tb_channel(const struct tls_creds *c, enum tls_role role, int fd,
		      struct tls_link **l, char *err, size_t errlen)
{
	*l = NULL;
	if (!c)
		return 0;
	return tls_link_start(c, role, fd, role == TLS_CLIENT && !c->psk ? "127.0.0.1" : NULL,
			      TB_TIMEOUT_S, l, err, errlen);
}

static void tb_close(int fd, struct tls_link *l, bool flush)
{
	if (l)
		tls_link_end(l, flush);
	else
		close(fd);
}

static void *tb_receive(void *arg)
{
	struct tb_dest *d = arg;
	struct mig_in in = { .fd = -1 };
	struct mig_event ev;
	struct tls_link *l;
	int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC);

	d->rc = tb_channel(d->c, TLS_SERVER, fd, &l, d->err, sizeof(d->err));
	if (!d->rc)
		d->rc = mig_in_open(&in, fd, d->mem, d->size, NULL, d->err, sizeof(d->err));
	while (!d->rc && !(d->rc = mig_next(&in, &ev, d->err, sizeof(d->err)))) {
		free(ev.data);
		if (ev.type == MIG_END) {
			d->rc = mig_send_ack(fd, MIG_ACK_RUNNING, NULL);
			break;
		}
	}
	mig_in_close(&in);
	tb_close(fd, l, true);
	return NULL;
}

static void tb_fill(uint8_t *m, uint64_t size, unsigned zero_pct)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	for (uint64_t p = 0; p < size / TB_PAGE; p++) {
		uint64_t *w = (uint64_t *)(m + p * TB_PAGE);

		if (p * 2654435761u % 100 < zero_pct)
			continue;
		for (unsigned i = 0; i < TB_PAGE / 8; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			w[i] = x;
		}
	}
}

static int tb_send(const struct tls_creds *c, uint16_t port, const uint8_t *mem, uint64_t size,
		   uint64_t *bytes, char *err, size_t errlen)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char why[MIG_WHY_MAX];
	enum mig_ack_code code;
	struct tls_link *l;
	struct mig_out o;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -errno;
	rc = tb_channel(c, TLS_CLIENT, fd, &l, err, errlen);
	if (rc) {
		close(fd);
		return rc;
	}
	rc = mig_out_open(&o, fd, size, IMG_CODEC_AUTO, 0);
	if (!rc)
		rc = mig_send_memory(&o, mem, 0, size);
	if (!rc)
		rc = mig_send_end(&o);
	if (!rc)
		rc = mig_read_ack(fd, &code, why);
	if (!rc && code != MIG_ACK_RUNNING)
		rc = -EPROTO;
	*bytes = o.bytes_sent;
	mig_out_close(&o);
	tb_close(fd, l, false);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "creds", required_argument, NULL, 'c' }, { "channel", required_argument, NULL, 'h' },
		{ "mem", required_argument, NULL, 'm' }, { "zero", required_argument, NULL, 'z' },
		{ NULL, 0, NULL, 0 } };
	const char *dir = NULL, *channel = "plain";
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	uint64_t size = 256ULL << 20, bytes = 0;
	unsigned zero = 30;
	struct tls_creds sc = { .psk = NULL }, cc = { .psk = NULL };
	struct tb_dest d = { .lfd = -1 };
	char err[512] = "", sub[4096];
	pthread_t t;
	double t0, t1;
	uint8_t *src;
	int o, rc;

	signal(SIGPIPE, SIG_IGN); /* as ccvm: a peer gone is an error, not the end */
	if (getenv("TLS_BENCH_DEBUG"))
		log_set_level(LOG_DEBUG);
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'c')
			dir = optarg;
		else if (o == 'h')
			channel = optarg;
		else if (o == 'm')
			size = strtoull(optarg, NULL, 10) << 20;
		else if (o == 'z')
			zero = (unsigned)atoi(optarg);
		else
			return 2;
	}
	if (!size || zero > 100 || (strcmp(channel, "plain") && !dir) ||
	    (strcmp(channel, "plain") && strcmp(channel, "x509") && strcmp(channel, "psk"))) {
		fprintf(stderr, "usage: tls-bench --creds DIR --channel plain|x509|psk [--mem MiB] "
				"[--zero PCT]\n");
		return 2;
	}
	if (strcmp(channel, "plain")) {
		snprintf(sub, sizeof(sub), "%s/%s", dir, channel);
		if (tls_creds_read(sub, TLS_SERVER, &sc, err, sizeof(err)) ||
		    tls_creds_read(sub, TLS_CLIENT, &cc, err, sizeof(err))) {
			fprintf(stderr, "tls-bench: %s\n", err);
			return 1;
		}
		d.c = &sc;
	}
	src = malloc(size);
	d.mem = calloc(1, size);
	d.size = size;
	if (!src || !d.mem)
		return 1;
	tb_fill(src, size, zero);
	/* The receiver's memory faulted in first, as ccvm's destination does on the
	 * source's plan: first touch here costs more than the transfer. */
	memset(d.mem, 0xa5, size);
	d.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (d.lfd < 0 || bind(d.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(d.lfd, 1) < 0 ||
	    getsockname(d.lfd, (struct sockaddr *)&a, &al) < 0)
		return 1;
	if (pthread_create(&t, NULL, tb_receive, &d))
		return 1;
	t0 = tb_now();
	rc = tb_send(d.c ? &cc : NULL, ntohs(a.sin_port), src, size, &bytes, err, sizeof(err));
	t1 = tb_now();
	pthread_join(t, NULL);
	if (rc || d.rc) {
		fprintf(stderr, "tls-bench: %s: %s %s\n", channel, err, d.err);
		return 1;
	}
	printf("%s,%.6f,%llu,%s\n", channel, t1 - t0, (unsigned long long)bytes,
	       memcmp(src, d.mem, size) ? "differs" : "equal");
	tls_creds_free(&sc);
	tls_creds_free(&cc);
	free(src);
	free(d.mem);
	close(d.lfd);
	return 0;
}
