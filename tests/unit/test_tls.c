/*
 * test_tls.c - the migration's TLS channel (vmm/tls.c) over real loopback TCP, with
 * credentials made by openssl as a user would (tests/tls/make-creds.sh): x509 and PSK
 * links carry bytes both ways intact; a wrong CA, a wrong key, a certificate for another
 * host, a name outside --tls-authz and a plain stream are each refused; malformed
 * credential directories are refused when read.
 */
#include "suites.h"
#include "../../vmm/tls.h"
#include "../../snapshot/migstream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define TLS_TEST_BYTES (3u << 20) /* more than the relays and the pair buffer hold */
#define TLS_TEST_TIMEOUT_S 20

static char creds_dir[] = "/tmp/ccvm-tls-XXXXXX";

/* Once for the suite, in the runner itself: the credentials the tests share. */
static void tls_setup(void)
{
	char cmd[256];

	signal(SIGPIPE, SIG_IGN); /* as ccvm's main(): a refused peer is an EPIPE */
	ck_assert_ptr_nonnull(mkdtemp(creds_dir));
	snprintf(cmd, sizeof(cmd), "tests/tls/make-creds.sh %s", creds_dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void tls_teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", creds_dir);
	if (system(cmd))
		fprintf(stderr, "test_tls: %s failed\n", cmd);
}

static void creds(const char *sub, enum tls_role role, struct tls_creds *c)
{
	char dir[256], err[512];

	snprintf(dir, sizeof(dir), "%s/%s", creds_dir, sub);
	ck_assert_msg(tls_creds_read(dir, role, c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(tls_creds_check(c, role, err, sizeof(err)) == 0, "%s", err);
}

/* A listener on 127.0.0.1, its port in *@port. */
static int listen_loopback(unsigned short *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int connect_loopback(unsigned short port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* The destination's side, on its own thread. */
struct server {
	int lfd;
	const struct tls_creds *c;
	const char *authz;
	int rc, authz_rc;
	char err[512];
	uint64_t got;            /* bytes read, and whether they were the pattern */
	bool intact;
	char peer[300];
};

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static bool read_pattern(int fd, uint64_t n, uint64_t *got)
{
	uint8_t buf[65536];
	bool ok = true;

	while (*got < n) {
		ssize_t r = mig_io_read(fd, buf, sizeof(buf));

		if (r <= 0)
			return false;
		for (ssize_t i = 0; i < r; i++)
			ok &= buf[i] == pattern(*got + (uint64_t)i);
		*got += (uint64_t)r;
	}
	return ok;
}

static bool write_pattern(int fd, uint64_t n)
{
	uint8_t buf[65536];

	for (uint64_t at = 0; at < n;) {
		size_t len = n - at < sizeof(buf) ? (size_t)(n - at) : sizeof(buf);

		for (size_t i = 0; i < len; i++)
			buf[i] = pattern(at + i);
		if (mig_io_write(fd, buf, len) != (ssize_t)len)
			return false;
		at += len;
	}
	return true;
}

/* The destination's side of a test: one connection on @lfd, its TLS handshake as the
 * server with @c. The connection, or -1 (closed) with why in @err and *@rc. */
static int accept_tls(int lfd, const struct tls_creds *c, struct tls_link **l, int *rc,
		      char *err, size_t errlen)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	*rc = tls_link_start(c, TLS_SERVER, fd, NULL, TLS_TEST_TIMEOUT_S, l, err, errlen);
	if (*rc) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *server_main(void *arg)
{
	struct server *s = arg;
	struct tls_link *l = NULL;
	int fd = accept_tls(s->lfd, s->c, &l, &s->rc, s->err, sizeof(s->err));

	if (fd < 0)
		return NULL;
	snprintf(s->peer, sizeof(s->peer), "%s", tls_link_peer(l));
	s->authz_rc = tls_link_authorize(l, s->authz, s->err, sizeof(s->err));
	if (!s->authz_rc) {
		s->intact = read_pattern(fd, TLS_TEST_BYTES, &s->got);
		s->intact &= write_pattern(fd, TLS_TEST_BYTES);
	}
	tls_link_end(l, true);
	return NULL;
}

struct outcome {
	int client_rc, server_rc, server_authz;
	char client_err[512], server_err[512], server_peer[300];
	bool intact;
};

/* One migration-sized exchange: @client_creds to a server with @server_creds, the
 * client checking the server against @host, the server its client against @authz. */
static void exchange(const char *server_creds, const char *client_creds, const char *host,
		     const char *client_authz, const char *authz, struct outcome *o)
{
	struct tls_creds sc, cc;
	struct server s = { .authz = authz };
	struct tls_link *l = NULL;
	unsigned short port;
	pthread_t t;
	int fd;

	memset(o, 0, sizeof(*o));
	creds(server_creds, TLS_SERVER, &sc);
	creds(client_creds, TLS_CLIENT, &cc);
	s.c = &sc;
	s.lfd = listen_loopback(&port);
	ck_assert_int_eq(pthread_create(&t, NULL, server_main, &s), 0);
	fd = connect_loopback(port);
	o->client_rc = tls_link_start(&cc, TLS_CLIENT, fd, host, TLS_TEST_TIMEOUT_S, &l,
				      o->client_err, sizeof(o->client_err));
	if (!o->client_rc &&
	    (o->client_rc = tls_link_authorize(l, client_authz, o->client_err,
					       sizeof(o->client_err)))) {
		tls_link_end(l, false);
	} else if (!o->client_rc) {
		uint64_t got = 0;

		o->intact = write_pattern(fd, TLS_TEST_BYTES);
		o->intact &= read_pattern(fd, TLS_TEST_BYTES, &got);
		if (tls_link_failure(l))
			snprintf(o->client_err, sizeof(o->client_err), "%s", tls_link_failure(l));
		tls_link_end(l, false);
	} else {
		close(fd);
	}
	pthread_join(t, NULL);
	close(s.lfd);
	o->server_rc = s.rc;
	o->server_authz = s.authz_rc;
	o->intact &= s.intact;
	memcpy(o->server_err, s.err, sizeof(s.err));
	memcpy(o->server_peer, s.peer, sizeof(s.peer));
	tls_creds_free(&sc);
	tls_creds_free(&cc);
}

START_TEST(test_tls_x509)
{
	struct outcome o;

	exchange("x509", "x509", "127.0.0.1", NULL, NULL, &o);
	ck_assert_msg(o.client_rc == 0, "client: %s", o.client_err);
	ck_assert_msg(o.server_rc == 0, "server: %s", o.server_err);
	ck_assert(o.intact);
	ck_assert_str_eq(o.server_peer, "source.test");
	/* --tls-authz: the client's CN (or DNS name) listed, or not */
	exchange("x509", "x509", "127.0.0.1", "destination.test", "x,source.test", &o);
	ck_assert_msg(o.client_rc == 0 && o.server_authz == 0, "%s %s", o.client_err, o.server_err);
	ck_assert(o.intact);
	exchange("x509", "x509", "127.0.0.1", NULL, "someone.else", &o);
	ck_assert_int_eq(o.server_authz, -EACCES);
	ck_assert_ptr_nonnull(strstr(o.server_err, "source.test"));
	ck_assert_ptr_nonnull(strstr(o.server_err, "--tls-authz"));
	exchange("x509", "x509", NULL, "other.test", NULL, &o);
	ck_assert_int_eq(o.client_rc, -EACCES);
}
END_TEST

START_TEST(test_tls_x509_refused)
{
	struct outcome o;

	/* The source trusts another CA: it refuses the destination's certificate. */
	exchange("x509", "other-ca", "127.0.0.1", NULL, NULL, &o);
	ck_assert_int_eq(o.client_rc, -EACCES);
	ck_assert_msg(strstr(o.client_err, "certificate was refused"), "%s", o.client_err);
	ck_assert_int_ne(o.server_rc, 0);
	ck_assert(!o.intact);
	/* The source's certificate is another CA's: the destination refuses it, and the
	 * source (its TLS 1.3 handshake over before that) reads why as an alert. */
	exchange("x509", "foreign", "127.0.0.1", NULL, NULL, &o);
	ck_assert_int_eq(o.server_rc, -EACCES);
	ck_assert(!o.intact);
	ck_assert_msg(o.client_rc != 0 || strstr(o.client_err, "alert"), "client: %d %s",
		      o.client_rc, o.client_err);
	/* The destination's certificate is not for the address dialled. */
	exchange("x509", "x509", "10.9.9.9", NULL, NULL, &o);
	ck_assert_int_eq(o.client_rc, -EACCES);
	ck_assert(!o.intact);
}
END_TEST

START_TEST(test_tls_psk)
{
	struct outcome o;

	exchange("psk", "psk", NULL, NULL, "source", &o);
	ck_assert_msg(o.client_rc == 0, "client: %s", o.client_err);
	ck_assert_msg(o.server_rc == 0 && o.server_authz == 0, "server: %s", o.server_err);
	ck_assert(o.intact);
	ck_assert_str_eq(o.server_peer, "source");
	exchange("psk", "psk-wrong", NULL, NULL, NULL, &o);
	ck_assert_int_ne(o.server_rc, 0);
	ck_assert(!o.intact);
}
END_TEST

/* A plain stream's first bytes at a TLS destination: no session. */
START_TEST(test_tls_plain_peer)
{
	struct tls_creds sc;
	struct server s = { .authz = NULL };
	unsigned short port;
	pthread_t t;
	int fd;

	creds("x509", TLS_SERVER, &sc);
	s.c = &sc;
	s.lfd = listen_loopback(&port);
	ck_assert_int_eq(pthread_create(&t, NULL, server_main, &s), 0);
	fd = connect_loopback(port);
	ck_assert(write(fd, "CCVMMIG1\2\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24) == 24);
	pthread_join(t, NULL);
	close(fd);
	close(s.lfd);
	ck_assert_int_ne(s.rc, 0);
	tls_creds_free(&sc);
}
END_TEST

/* The migration's conversation over a TLS link: hello, a plan answered PREPARED, the
 * memory, the end answered RUNNING; the destination's copy equal to the source's. */
#define TLS_TEST_RAM (8u << 20)

struct stream_dest {
	int lfd;
	const struct tls_creds *c;
	uint8_t *mem;
	int rc;
	char err[512];
};

static void *stream_dest_main(void *arg)
{
	struct stream_dest *d = arg;
	struct tls_link *l = NULL;
	struct mig_event ev;
	struct mig_in in = { .fd = -1 };
	int fd = accept_tls(d->lfd, d->c, &l, &d->rc, d->err, sizeof(d->err));

	if (fd < 0)
		return NULL;
	mig_bound(fd, TLS_TEST_TIMEOUT_S);
	d->rc = mig_in_open(&in, fd, d->mem, TLS_TEST_RAM, NULL, d->err, sizeof(d->err));
	while (!d->rc && !(d->rc = mig_next(&in, &ev, d->err, sizeof(d->err)))) {
		free(ev.data);
		if (ev.type == MIG_PLAN)
			d->rc = mig_send_ack(fd, MIG_ACK_PREPARED, NULL);
		if (ev.type == MIG_END) {
			d->rc = mig_send_ack(fd, MIG_ACK_RUNNING, NULL);
			break;
		}
	}
	mig_in_close(&in);
	tls_link_end(l, true);
	return NULL;
}

START_TEST(test_tls_stream)
{
	struct tls_creds sc, cc;
	struct stream_dest d = { .mem = calloc(1, TLS_TEST_RAM) };
	uint8_t *src = malloc(TLS_TEST_RAM);
	uint64_t plan[TLS_TEST_RAM / 4096 / 64];
	struct tls_link *l = NULL;
	enum mig_ack_code code;
	char err[512], why[MIG_WHY_MAX];
	unsigned short port;
	struct mig_out o;
	pthread_t t;
	int fd;

	ck_assert(d.mem && src);
	for (uint64_t i = 0; i < TLS_TEST_RAM; i++)
		src[i] = i % 3 ? pattern(i) : 0;
	memset(plan, 0xff, sizeof(plan));
	creds("psk", TLS_SERVER, &sc);
	creds("psk", TLS_CLIENT, &cc);
	d.c = &sc;
	d.lfd = listen_loopback(&port);
	ck_assert_int_eq(pthread_create(&t, NULL, stream_dest_main, &d), 0);
	fd = connect_loopback(port);
	ck_assert_msg(tls_link_start(&cc, TLS_CLIENT, fd, NULL, TLS_TEST_TIMEOUT_S, &l, err,
				     sizeof(err)) == 0, "%s", err);
	mig_bound(fd, TLS_TEST_TIMEOUT_S);
	ck_assert_int_eq(mig_out_open(&o, fd, TLS_TEST_RAM, IMG_CODEC_NONE, 0), 0);
	ck_assert_int_eq(mig_send_plan(&o, plan, sizeof(plan)), 0);
	ck_assert_int_eq(mig_read_ack(fd, &code, why), 0);
	ck_assert_int_eq(code, MIG_ACK_PREPARED);
	ck_assert_int_eq(mig_send_memory(&o, src, 0, TLS_TEST_RAM), 0);
	ck_assert_int_eq(mig_send_end(&o), 0);
	ck_assert_int_eq(mig_read_ack(fd, &code, why), 0);
	ck_assert_int_eq(code, MIG_ACK_RUNNING);
	mig_out_close(&o);
	tls_link_end(l, false);
	pthread_join(t, NULL);
	ck_assert_msg(d.rc == 0, "destination: %s", d.err);
	ck_assert(memcmp(src, d.mem, TLS_TEST_RAM) == 0);
	close(d.lfd);
	free(src);
	free(d.mem);
	tls_creds_free(&sc);
	tls_creds_free(&cc);
}
END_TEST

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(test_tls_creds_refused)
{
	char dir[] = "/tmp/ccvm-tlsbad-XXXXXX", err[512];
	static const char *const bad_psk[] = {
		"source\n", ":00112233445566778899aabbccddeeff\n", "source:0011\n",
		"source:00112233445566778899aabbccddeefg\n", "source:00112233445566778899aabbccddeef\n",
	};
	struct tls_creds c;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(tls_creds_read(dir, TLS_SERVER, &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "neither"));
	for (size_t i = 0; i < sizeof(bad_psk) / sizeof(bad_psk[0]); i++) {
		write_file(dir, "keys.psk", bad_psk[i]);
		ck_assert_int_eq(tls_creds_read(dir, TLS_CLIENT, &c, err, sizeof(err)), 0);
		ck_assert_msg(tls_creds_check(&c, TLS_CLIENT, err, sizeof(err)) == -EINVAL, "%s",
			      bad_psk[i]);
		tls_creds_free(&c);
	}
	write_file(dir, "ca-cert.pem", "not a certificate\n");
	ck_assert_int_eq(tls_creds_read(dir, TLS_SERVER, &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "both"));
	snprintf(err, sizeof(err), "%s/keys.psk", dir);
	unlink(err);
	ck_assert_int_eq(tls_creds_read(dir, TLS_SERVER, &c, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "server-cert.pem"));
	write_file(dir, "server-cert.pem", "x");
	write_file(dir, "server-key.pem", "y");
	ck_assert_int_eq(tls_creds_read(dir, TLS_SERVER, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(tls_creds_check(&c, TLS_SERVER, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "ca-cert.pem"));
	tls_creds_free(&c);
	ck_assert(tls_authz_ok("a,b.example"));
	ck_assert(!tls_authz_ok(""));
	ck_assert(!tls_authz_ok("a,,b"));
	ck_assert(!tls_authz_ok("a,"));
	ck_assert(!tls_authz_ok(",a"));
	snprintf(err, sizeof(err), "rm -rf %s", dir);
	ck_assert_int_eq(system(err), 0);
}
END_TEST

Suite *tls_suite(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("tls");

	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, tls_setup, tls_teardown);
	tcase_add_test(tc, test_tls_x509);
	tcase_add_test(tc, test_tls_x509_refused);
	tcase_add_test(tc, test_tls_psk);
	tcase_add_test(tc, test_tls_plain_peer);
	tcase_add_test(tc, test_tls_stream);
	tcase_add_test(tc, test_tls_creds_refused);
	suite_add_tcase(s, tc);
	return s;
}
