/*
 * tls.c - a migration channel over TLS, with GnuTLS (docs/migration.md, "TLS"): x509
 * certificates under QEMU's file names, or a pre-shared key; both sides authenticated,
 * optionally narrowed to named peers (--tls-authz).
 *
 * The stream's code reads and writes its connection through snapshot/migstream.c, by
 * the socket's fd: a link attaches the session to that fd (mig_io_attach), and every
 * byte of the stream, the answers and post-copy's requests then goes through the
 * session, with no thread of its own; records are gathered and the socket read ahead a
 * quarter MiB at a time (TLS_IO_BUF). The socket stays what is bounded (--peer-timeout:
 * a session's read or write that waits it out says EAGAIN, as the socket would), polled
 * and shut down (a cancel). GnuTLS lets one
 * thread send while another receives; senders take turns, and so do readers.
 *
 * Credentials are read from DIR before anything runs confined: restore reads them
 * before it listens, and `ctl migrate`'s client reads them and sends them over the
 * control socket, so the confined monitor never opens DIR. They are checked here as
 * hostile input: sizes bounded, PSK lines parsed strictly, PEM left to GnuTLS.
 */
#include "tls.h"
#include "../base/log.h"
#include "../snapshot/migstream.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* TLS 1.2 and 1.3 only; AES-GCM first (the CPU's AES instructions carry a migration's
 * gigabytes), ChaCha20 for a peer without; with a PSK, only key exchanges that add
 * (EC)DHE, for forward secrecy, as QEMU's. */
#define TLS_PRIORITY_BASE "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:" \
			  "+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305"
#define TLS_PRIORITY_X509 TLS_PRIORITY_BASE
#define TLS_PRIORITY_PSK  TLS_PRIORITY_BASE ":-KX-ALL:+ECDHE-PSK:+DHE-PSK"
#define TLS_PSK_KEY_MIN   16      /* bytes: a weaker key is refused */
#define TLS_PSK_KEY_MAX   512
#define TLS_LINGER_MS     2000        /* after a last answer: the peer's close awaited */
#define TLS_LINGER_READS  4096        /* and that many records of it read at most */
#define TLS_MS_PER_S      1000
#define TLS_WHY_MAX       256
#define TLS_RECORD_MAX    (16 << 10) /* a TLS record's plaintext at most */
/* Bytes of the socket read ahead, and of records gathered before a send: GnuTLS reads a
 * record's header and body apart and sends each record alone, two calls per 16 KiB
 * received and one sent, which cost a migration more than its cipher does. */
#define TLS_IO_BUF        (256 << 10)

struct tls_link {
	gnutls_session_t s;
	gnutls_certificate_credentials_t x509;
	gnutls_psk_client_credentials_t pskc;
	gnutls_psk_server_credentials_t psks;
	gnutls_x509_crt_t peer_crt;      /* x509: the peer's certificate, for --tls-authz */
	const struct tls_creds *c;       /* the server's PSK lines (the caller's, kept) */
	enum tls_role role;
	int fd;                          /* the connection */
	pthread_mutex_t send_lock;       /* one sender at a time */
	pthread_mutex_t recv_lock;       /* one reader at a time */
	uint8_t *rbuf;                   /* read ahead, under recv_lock (or the handshake) */
	size_t rlen, roff;               /* its bytes, and how many were pulled */
	pthread_mutex_t wlock;           /* the gathered records, and their order */
	uint8_t *wbuf;                   /* records gathered by @wowner's tls_write */
	size_t wlen;
	pthread_t wowner;
	bool gathering;                  /* a tls_write gathers (its thread: @wowner) */
	char peer[TLS_NAME_MAX + 32];    /* its name, or what a PSK client knows of it */
	char why[TLS_WHY_MAX];           /* how the session failed, once @failed */
	bool failed;                     /* (atomic) set by a read that met it */
};

/* ---- credentials ---- */

static int tls_file(const char *dir, const char *name, char **out, char *err, size_t errlen)
{
	char path[4096];
	struct stat st;
	ssize_t n = 0;
	int fd, rc = 0;

	*out = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return log_set_err(-ENAMETOOLONG, err, errlen, "--tls-creds %s: too long", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return log_set_err(-errno, err, errlen, "--tls-creds: %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > TLS_FILE_MAX)
		rc = log_set_err(-EINVAL, err, errlen, "--tls-creds: %s: not a file of at most %d "
				 "bytes", path, TLS_FILE_MAX);
	if (!rc && !(*out = calloc(1, (size_t)st.st_size + 1)))
		rc = -ENOMEM;
	while (!rc && n < st.st_size) {
		ssize_t r = read(fd, *out + n, (size_t)(st.st_size - n));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			rc = log_set_err(r < 0 ? -errno : -EIO, err, errlen, "--tls-creds: reading %s: "
					 "%s", path, r < 0 ? strerror(errno) : "it shrank");
		n += r > 0 ? r : 0;
	}
	close(fd);
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

static bool tls_exists(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

int tls_creds_read(const char *dir, enum tls_role role, struct tls_creds *c, char *err,
		   size_t errlen)
{
	bool x509 = tls_exists(dir, "ca-cert.pem"), psk = tls_exists(dir, "keys.psk");
	const char *cert = role == TLS_SERVER ? "server-cert.pem" : "client-cert.pem";
	const char *key = role == TLS_SERVER ? "server-key.pem" : "client-key.pem";
	int rc;

	memset(c, 0, sizeof(*c));
	if (x509 == psk)
		return log_set_err(-EINVAL, err, errlen, "--tls-creds %s: %s", dir, x509 ?
				   "holds both ca-cert.pem and keys.psk: keep one kind" :
				   "holds neither ca-cert.pem (x509) nor keys.psk (a PSK)");
	if (psk)
		return tls_file(dir, "keys.psk", &c->psk, err, errlen);
	rc = tls_file(dir, "ca-cert.pem", &c->ca, err, errlen);
	if (!rc)
		rc = tls_file(dir, cert, &c->cert, err, errlen);
	if (!rc)
		rc = tls_file(dir, key, &c->key, err, errlen);
	if (rc)
		tls_creds_free(c);
	return rc;
}

void tls_creds_free(struct tls_creds *c)
{
	free(c->ca);
	free(c->cert);
	if (c->key)
		explicit_bzero(c->key, strlen(c->key));
	free(c->key);
	if (c->psk)
		explicit_bzero(c->psk, strlen(c->psk));
	free(c->psk);
	memset(c, 0, sizeof(*c));
}

static int tls_hex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

struct tls_psk {
	char name[TLS_NAME_MAX];
	uint8_t key[TLS_PSK_KEY_MAX];
	size_t len;
};

/* The line at *@p of keys.psk ("name:hexkey", blank lines skipped) into @k, *@p past it:
 * 1, 0 at the end, or -EINVAL. */
static int tls_psk_next(const char **p, struct tls_psk *k)
{
	const char *s = *p, *colon, *end;
	size_t hex;

	while (*s == '\n' || *s == '\r')
		s++;
	if (!*s)
		return 0;
	end = s + strcspn(s, "\r\n");
	colon = memchr(s, ':', (size_t)(end - s));
	*p = end;
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(k->name))
		return -EINVAL;
	hex = (size_t)(end - colon - 1);
	if (hex % 2 || hex / 2 < TLS_PSK_KEY_MIN || hex / 2 > TLS_PSK_KEY_MAX)
		return -EINVAL;
	memcpy(k->name, s, (size_t)(colon - s));
	k->name[colon - s] = '\0';
	k->len = hex / 2;
	for (size_t i = 0; i < k->len; i++) {
		int hi = tls_hex(colon[1 + 2 * i]), lo = tls_hex(colon[2 + 2 * i]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		k->key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 1;
}

/* The key of @name in @text (NULL: the first line's): 0, -ENOENT, or -EINVAL for a
 * malformed file. */
static int tls_psk_find(const char *text, const char *name, struct tls_psk *k)
{
	const char *p = text;
	int rc;

	while ((rc = tls_psk_next(&p, k)) == 1)
		if (!name || strcmp(k->name, name) == 0)
			return 0;
	return rc ? rc : -ENOENT;
}

static int tls_psk_check(const char *text, char *err, size_t errlen)
{
	struct tls_psk k;
	const char *p = text;
	int rc, lines = 0;

	while ((rc = tls_psk_next(&p, &k)) == 1)
		lines++;
	explicit_bzero(&k, sizeof(k));
	if (rc || !lines)
		return log_set_err(-EINVAL, err, errlen, "keys.psk: lines of NAME:HEXKEY, NAME 1 to "
				   "%d bytes, the key %d to %d bytes in hex", TLS_NAME_MAX - 1,
				   TLS_PSK_KEY_MIN, TLS_PSK_KEY_MAX);
	return 0;
}

/* The server's lookup of a client's key by the name it gave. */
static int tls_psk_server_key(gnutls_session_t s, const char *name, gnutls_datum_t *key)
{
	struct tls_link *l = gnutls_session_get_ptr(s);
	struct tls_psk k;
	int rc = tls_psk_find(l->c->psk, name, &k);

	if (!rc && !(key->data = gnutls_malloc(k.len)))
		rc = -ENOMEM;
	if (!rc) {
		memcpy(key->data, k.key, k.len);
		key->size = (unsigned)k.len;
	}
	explicit_bzero(&k, sizeof(k));
	return rc ? -1 : 0;
}

static void tls_creds_drop(struct tls_link *l)
{
	if (l->x509)
		gnutls_certificate_free_credentials(l->x509);
	if (l->pskc)
		gnutls_psk_free_client_credentials(l->pskc);
	if (l->psks)
		gnutls_psk_free_server_credentials(l->psks);
	l->x509 = NULL;
	l->pskc = NULL;
	l->psks = NULL;
}

static int tls_creds_x509(struct tls_link *l, const struct tls_creds *c, char *err,
			  size_t errlen)
{
	const char *who = l->role == TLS_SERVER ? "server" : "client";
	gnutls_datum_t ca = { (unsigned char *)c->ca, (unsigned)strlen(c->ca) };
	gnutls_datum_t cert = { (unsigned char *)c->cert, (unsigned)strlen(c->cert) };
	gnutls_datum_t key = { (unsigned char *)c->key, (unsigned)strlen(c->key) };
	int rc = gnutls_certificate_allocate_credentials(&l->x509);

	if (rc < 0)
		return log_set_err(-ENOMEM, err, errlen, "TLS: %s", gnutls_strerror(rc));
	rc = gnutls_certificate_set_x509_trust_mem(l->x509, &ca, GNUTLS_X509_FMT_PEM);
	if (rc <= 0)
		return log_set_err(-EINVAL, err, errlen, "--tls-creds: ca-cert.pem: %s",
				   rc ? gnutls_strerror(rc) : "no certificate in it");
	rc = gnutls_certificate_set_x509_key_mem(l->x509, &cert, &key, GNUTLS_X509_FMT_PEM);
	if (rc < 0)
		return log_set_err(-EINVAL, err, errlen, "--tls-creds: %s-cert.pem and "
				   "%s-key.pem: %s", who, who, gnutls_strerror(rc));
	return 0;
}

static int tls_creds_psk(struct tls_link *l, const struct tls_creds *c, char *err,
			 size_t errlen)
{
	struct tls_psk k;
	gnutls_datum_t key;
	int rc = tls_psk_check(c->psk, err, errlen);

	if (rc)
		return rc;
	if (l->role == TLS_SERVER) {
		if (gnutls_psk_allocate_server_credentials(&l->psks) < 0)
			return log_set_err(-ENOMEM, err, errlen, "TLS: no memory");
		gnutls_psk_set_server_credentials_function(l->psks, tls_psk_server_key);
		return 0;
	}
	if (gnutls_psk_allocate_client_credentials(&l->pskc) < 0)
		return log_set_err(-ENOMEM, err, errlen, "TLS: no memory");
	tls_psk_find(c->psk, NULL, &k);
	key = (gnutls_datum_t){ k.key, (unsigned)k.len };
	rc = gnutls_psk_set_client_credentials(l->pskc, k.name, &key, GNUTLS_PSK_KEY_RAW);
	snprintf(l->peer, sizeof(l->peer), "the holder of %s's key", k.name);
	explicit_bzero(&k, sizeof(k));
	return rc < 0 ? log_set_err(-EINVAL, err, errlen, "keys.psk: %s", gnutls_strerror(rc)) : 0;
}

static int tls_creds_load(struct tls_link *l, const struct tls_creds *c, char *err,
			  size_t errlen)
{
	if (c->psk)
		return tls_creds_psk(l, c, err, errlen);
	if (!c->ca || !c->cert || !c->key)
		return log_set_err(-EINVAL, err, errlen, "--tls-creds: x509 needs a CA, a "
				   "certificate and its key");
	return tls_creds_x509(l, c, err, errlen);
}

int tls_creds_check(const struct tls_creds *c, enum tls_role role, char *err, size_t errlen)
{
	struct tls_link l = { .role = role, .c = c };
	int rc = tls_creds_load(&l, c, err, errlen);

	tls_creds_drop(&l);
	return rc;
}

bool tls_authz_ok(const char *list)
{
	size_t n = strlen(list);

	if (!n || n >= TLS_AUTHZ_MAX)
		return false;
	for (const char *p = list; *p; p += *p ? 1 : 0) {
		size_t len = strcspn(p, ",");

		if (!len || len >= TLS_NAME_MAX)
			return false;
		p += len;
	}
	return list[n - 1] != ',';
}

/* ---- the handshake ---- */

static const char *tls_peer_role(const struct tls_link *l)
{
	return l->role == TLS_CLIENT ? "destination" : "source";
}

/* Why the handshake failed, for the user: -errno with it in @err. */
static int tls_handshake_err(const struct tls_link *l, int rc, unsigned timeout_s, char *err,
			     size_t errlen)
{
	const char *peer = tls_peer_role(l);
	gnutls_datum_t why = { NULL, 0 };
	int ret;

	switch (rc) {
	case GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR:
	case GNUTLS_E_CERTIFICATE_ERROR:
		gnutls_certificate_verification_status_print(
			gnutls_session_get_verify_cert_status(l->s), GNUTLS_CRT_X509, &why, 0);
		ret = log_set_err(-EACCES, err, errlen, "TLS: the %s's certificate was refused: "
				  "%s", peer, why.data ? (char *)why.data : gnutls_strerror(rc));
		gnutls_free(why.data);
		return ret;
	case GNUTLS_E_FATAL_ALERT_RECEIVED:
		return log_set_err(-EACCES, err, errlen, "TLS: the %s refused the handshake "
				   "(alert: %s): its --tls-creds do not accept ours", peer,
				   gnutls_alert_get_name(gnutls_alert_get(l->s)));
	case GNUTLS_E_UNEXPECTED_PACKET_LENGTH:
	case GNUTLS_E_UNSUPPORTED_VERSION_PACKET:
	case GNUTLS_E_UNEXPECTED_PACKET:
	case GNUTLS_E_RECORD_OVERFLOW:
		return log_set_err(-EPROTO, err, errlen, "TLS: the %s does not speak TLS (%s): "
				   "give both sides --tls-creds", peer, gnutls_strerror(rc));
	case GNUTLS_E_AGAIN:
	case GNUTLS_E_TIMEDOUT:
		return log_set_err(-ETIMEDOUT, err, errlen, "TLS: the %s said nothing for %u s "
				   "in the handshake (--peer-timeout)", peer, timeout_s);
	case GNUTLS_E_PREMATURE_TERMINATION:
	case GNUTLS_E_PULL_ERROR:
	case GNUTLS_E_PUSH_ERROR:
		return log_set_err(-ECONNRESET, err, errlen, "TLS: the %s hung up in the "
				   "handshake (it refused our credentials, or speaks no TLS)", peer);
	default:
		return log_set_err(-EACCES, err, errlen, "TLS: the handshake with the %s failed: "
				   "%s (a different key or CA on each side?)", peer,
				   gnutls_strerror(rc));
	}
}

/* The peer's name: a certificate's CN (its certificate kept for --tls-authz), or the
 * PSK user a server looked up. */
static void tls_peer_name(struct tls_link *l)
{
	const gnutls_datum_t *certs;
	unsigned n = 0;
	size_t len = sizeof(l->peer);

	if (l->psks) {
		const char *user = gnutls_psk_server_get_username(l->s);

		snprintf(l->peer, sizeof(l->peer), "%s", user ? user : "");
		return;
	}
	if (l->pskc)
		return; /* said when the credentials were set */
	certs = gnutls_certificate_get_peers(l->s, &n);
	if (!n || gnutls_x509_crt_init(&l->peer_crt) < 0)
		return;
	if (gnutls_x509_crt_import(l->peer_crt, &certs[0], GNUTLS_X509_FMT_DER) < 0) {
		gnutls_x509_crt_deinit(l->peer_crt);
		l->peer_crt = NULL;
		return;
	}
	if (gnutls_x509_crt_get_dn_by_oid(l->peer_crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0,
					  l->peer, &len) < 0)
		l->peer[0] = '\0';
}

/* The session's own reads and writes of the socket, with the calls every thread of the
 * monitor may make (confine_seccomp.c): post-copy's threads read and write the stream
 * too, and GnuTLS's defaults (recv, sendmsg) are not theirs. Reads are served from a
 * buffer filled a socket read at a time. */
static ssize_t tls_pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
	struct tls_link *l = p;
	size_t n;

	if (l->roff == l->rlen) {
		ssize_t r = read(l->fd, l->rbuf, TLS_IO_BUF);

		if (r <= 0)
			return r;
		l->roff = 0;
		__atomic_store_n(&l->rlen, (size_t)r, __ATOMIC_RELEASE);
	}
	n = l->rlen - l->roff < len ? l->rlen - l->roff : len;
	memcpy(buf, l->rbuf + l->roff, n);
	__atomic_store_n(&l->roff, l->roff + n, __ATOMIC_RELEASE);
	return (ssize_t)n;
}

/* The bytes read ahead and not yet pulled (a racy look, for polling). */
static size_t tls_ahead(const struct tls_link *l)
{
	size_t off = __atomic_load_n(&l->roff, __ATOMIC_ACQUIRE);
	size_t len = __atomic_load_n(&l->rlen, __ATOMIC_ACQUIRE);

	return len > off ? len - off : 0;
}

/* All of @len sent (a bounded wait that passes says EAGAIN, as send does). */
static ssize_t tls_send_all(int fd, const uint8_t *buf, size_t len)
{
	for (size_t at = 0; at < len;) {
		ssize_t r = send(fd, buf + at, len - at, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		at += (size_t)r;
	}
	return (ssize_t)len;
}

/* The gathered records sent; wlock held. */
static int tls_flush_locked(struct tls_link *l)
{
	ssize_t r = l->wlen ? tls_send_all(l->fd, l->wbuf, l->wlen) : 0;

	l->wlen = 0;
	return r < 0 ? -1 : 0;
}

/* A record: gathered while its thread's tls_write runs, else sent at once after those
 * gathered before it (an alert from a reader keeps its place in the sequence). */
static ssize_t tls_push(gnutls_transport_ptr_t p, const void *buf, size_t len)
{
	struct tls_link *l = p;
	ssize_t r = (ssize_t)len;

	pthread_mutex_lock(&l->wlock);
	if (l->gathering && pthread_equal(l->wowner, pthread_self()) &&
	    len <= TLS_IO_BUF) {
		if (l->wlen + len > TLS_IO_BUF && tls_flush_locked(l))
			r = -1;
		if (r >= 0) {
			memcpy(l->wbuf + l->wlen, buf, len);
			l->wlen += len;
		}
	} else if (tls_flush_locked(l) || tls_send_all(l->fd, buf, len) < 0) {
		r = -1;
	}
	pthread_mutex_unlock(&l->wlock);
	return r;
}

/* The handshake's waits (its timeout), and a linger's: bytes read ahead count. */
static int tls_pull_timeout(gnutls_transport_ptr_t p, unsigned ms)
{
	struct tls_link *l = p;
	struct pollfd pfd = { .fd = l->fd, .events = POLLIN };

	if (tls_ahead(l))
		return 1;
	return poll(&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

/* What was agreed, in the log's debug level. */
static void tls_log_session(const struct tls_link *l)
{
	char *desc = gnutls_session_get_desc(l->s);

	log_debug("TLS with the %s: %s, key exchange %s", tls_peer_role(l), desc ? desc : "?",
		  gnutls_kx_get_name(gnutls_kx_get(l->s)));
	gnutls_free(desc);
}

static int tls_session(struct tls_link *l, const struct tls_creds *c, const char *host,
		       unsigned timeout_s, char *err, size_t errlen)
{
	int rc = tls_creds_load(l, c, err, errlen);

	if (rc)
		return rc;
	/* No session tickets: nothing resumes, and a ticket is a record that is not the
	 * stream's. Post-copy's source polls the socket for the destination's requests: a
	 * ticket there would make it wait in a read for a request that may never come. */
	rc = gnutls_init(&l->s, (l->role == TLS_SERVER ? GNUTLS_SERVER : GNUTLS_CLIENT) |
				GNUTLS_NO_SIGNAL | GNUTLS_NO_TICKETS);
	if (rc < 0)
		return log_set_err(-ENOMEM, err, errlen, "TLS: %s", gnutls_strerror(rc));
	gnutls_session_set_ptr(l->s, l);
	rc = gnutls_priority_set_direct(l->s, c->psk ? TLS_PRIORITY_PSK : TLS_PRIORITY_X509,
					NULL);
	if (rc >= 0 && c->psk)
		rc = gnutls_credentials_set(l->s, GNUTLS_CRD_PSK, l->psks ? (void *)l->psks :
									   (void *)l->pskc);
	if (rc >= 0 && !c->psk)
		rc = gnutls_credentials_set(l->s, GNUTLS_CRD_CERTIFICATE, l->x509);
	if (rc < 0)
		return log_set_err(-EINVAL, err, errlen, "TLS: %s", gnutls_strerror(rc));
	if (!c->psk) {
		if (l->role == TLS_SERVER)
			gnutls_certificate_server_set_request(l->s, GNUTLS_CERT_REQUIRE);
		gnutls_session_set_verify_cert(l->s, l->role == TLS_CLIENT ? host : NULL, 0);
	}
	gnutls_transport_set_ptr(l->s, l);
	gnutls_transport_set_push_function(l->s, tls_push);
	gnutls_transport_set_pull_function(l->s, tls_pull);
	gnutls_transport_set_pull_timeout_function(l->s, tls_pull_timeout);
	gnutls_handshake_set_timeout(l->s, timeout_s * TLS_MS_PER_S);
	do
		rc = gnutls_handshake(l->s);
	while (rc == GNUTLS_E_INTERRUPTED);
	if (rc < 0) {
		/* The peer hears why as an alert (a client's TLS 1.3 handshake ends before its
		 * certificate is checked: it reads the alert in place of the first answer). */
		if (rc != GNUTLS_E_FATAL_ALERT_RECEIVED && rc != GNUTLS_E_AGAIN)
			gnutls_alert_send_appropriate(l->s, rc);
		return tls_handshake_err(l, rc, timeout_s, err, errlen);
	}
	tls_peer_name(l);
	tls_log_session(l);
	return 0;
}

/* ---- the stream's bytes over the session ---- */

/* The session failed under the stream: why, for tls_link_failure. (TLS 1.3 ends the
 * client's handshake before the server has checked its certificate: a refusal of it
 * comes as an alert on the first read.) */
static void tls_failed(struct tls_link *l, int rc)
{
	if (__atomic_load_n(&l->failed, __ATOMIC_ACQUIRE))
		return; /* the first failure says why; the reads after it, only that it failed */
	if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED)
		snprintf(l->why, sizeof(l->why), "TLS: the %s ended the session (alert: %s): its "
			 "--tls-creds do not accept ours", tls_peer_role(l),
			 gnutls_alert_get_name(gnutls_alert_get(l->s)));
	else
		snprintf(l->why, sizeof(l->why), "TLS: the session with the %s failed: %s",
			 tls_peer_role(l), gnutls_strerror(rc));
	__atomic_store_n(&l->failed, true, __ATOMIC_RELEASE);
}

/* As read(2) for the stream (snapshot/migstream.c): as many bytes as the session holds
 * already, up to @len (a record is 16 KiB at most: those already off the socket join
 * it), else one wait for the next; 0 at the session's end, or a connection cut. */
static ssize_t tls_read(void *ctx, void *buf, size_t len)
{
	struct tls_link *l = ctx;
	size_t got = 0;
	ssize_t r;

	pthread_mutex_lock(&l->recv_lock);
	do
		r = gnutls_record_recv(l->s, (uint8_t *)buf + got, len - got);
	while (r > 0 && (got += (size_t)r) < len && gnutls_record_check_pending(l->s));
	pthread_mutex_unlock(&l->recv_lock);
	if (got)
		return (ssize_t)got; /* (an error after them is the next read's) */
	if (r >= 0 || r == GNUTLS_E_PREMATURE_TERMINATION)
		return 0;
	if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED)
		tls_failed(l, (int)r);
	errno = r == GNUTLS_E_AGAIN ? EAGAIN : r == GNUTLS_E_INTERRUPTED ? EINTR : ECONNRESET;
	return -1;
}

/* As write(2): all of @len sealed in records and sent in one go (corked), or -1 (EAGAIN:
 * the peer took nothing for the socket's bound; EPIPE otherwise). Senders take turns:
 * post-copy's answers and requests come from more than one thread. */
static ssize_t tls_write(void *ctx, const void *buf, size_t len)
{
	struct tls_link *l = ctx;
	ssize_t r = 0;

	pthread_mutex_lock(&l->send_lock);
	pthread_mutex_lock(&l->wlock);
	l->wowner = pthread_self();
	l->gathering = true;
	pthread_mutex_unlock(&l->wlock);
	for (size_t at = 0; r >= 0 && at < len; at += r > 0 ? (size_t)r : 0) {
		r = gnutls_record_send(l->s, (const uint8_t *)buf + at, len - at);
		if (r == GNUTLS_E_INTERRUPTED)
			r = 0;
	}
	pthread_mutex_lock(&l->wlock);
	l->gathering = false;
	if (tls_flush_locked(l) && r >= 0)
		r = errno == EAGAIN ? GNUTLS_E_AGAIN : GNUTLS_E_PUSH_ERROR;
	pthread_mutex_unlock(&l->wlock);
	pthread_mutex_unlock(&l->send_lock);
	if (r >= 0)
		return (ssize_t)len;
	errno = r == GNUTLS_E_AGAIN ? EAGAIN : EPIPE;
	return -1;
}

static size_t tls_pending(void *ctx)
{
	struct tls_link *l = ctx;

	return gnutls_record_check_pending(l->s) + tls_ahead(l);
}

static const struct mig_io_ops tls_io = { .read = tls_read, .write = tls_write,
					  .pending = tls_pending };

static void tls_link_free(struct tls_link *l)
{
	if (l->s)
		gnutls_deinit(l->s);
	if (l->peer_crt)
		gnutls_x509_crt_deinit(l->peer_crt);
	tls_creds_drop(l);
	pthread_mutex_destroy(&l->send_lock);
	pthread_mutex_destroy(&l->recv_lock);
	pthread_mutex_destroy(&l->wlock);
	free(l->rbuf);
	free(l->wbuf);
	free(l);
}

int tls_link_start(const struct tls_creds *c, enum tls_role role, int fd, const char *host,
		   unsigned timeout_s, struct tls_link **out, char *err, size_t errlen)
{
	struct tls_link *l = calloc(1, sizeof(*l));
	int rc;

	if (!l)
		return log_set_err(-ENOMEM, err, errlen, "TLS: no memory");
	l->role = role;
	l->c = c;
	l->fd = fd;
	pthread_mutex_init(&l->send_lock, NULL);
	pthread_mutex_init(&l->recv_lock, NULL);
	pthread_mutex_init(&l->wlock, NULL);
	l->rbuf = malloc(TLS_IO_BUF);
	l->wbuf = malloc(TLS_IO_BUF);
	rc = l->rbuf && l->wbuf ? tls_session(l, c, host, timeout_s, err, errlen) :
				  log_set_err(-ENOMEM, err, errlen, "TLS: no memory");
	if (!rc && mig_io_attach(fd, &tls_io, l))
		rc = log_set_err(-EBUSY, err, errlen, "TLS: too many sessions at once");
	if (rc) {
		tls_link_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* Whether the peer's certificate or PSK user answers to @name. */
static bool tls_peer_is(const struct tls_link *l, const char *name)
{
	if (l->peer_crt && gnutls_x509_crt_check_hostname2(l->peer_crt, name,
							   GNUTLS_VERIFY_DO_NOT_ALLOW_WILDCARDS))
		return true;
	return l->peer[0] && (l->peer_crt || l->psks) && strcmp(l->peer, name) == 0;
}

int tls_link_authorize(const struct tls_link *l, const char *authz, char *err, size_t errlen)
{
	char name[TLS_NAME_MAX];

	if (!authz)
		return 0;
	for (const char *p = authz; *p;) {
		size_t len = strcspn(p, ",");

		if (len && len < sizeof(name)) {
			memcpy(name, p, len);
			name[len] = '\0';
			if (tls_peer_is(l, name))
				return 0;
		}
		p += len + (p[len] == ',');
	}
	if (l->pskc)
		return log_set_err(-EACCES, err, errlen, "--tls-authz names clients: with a PSK "
				   "the destination has no name to check");
	return log_set_err(-EACCES, err, errlen, "TLS: the %s's name (%s) is not in "
			   "--tls-authz %s", tls_peer_role(l), l->peer[0] ? l->peer : "none", authz);
}

const char *tls_link_peer(const struct tls_link *l)
{
	return l->peer;
}

const char *tls_link_failure(const struct tls_link *l)
{
	return l && __atomic_load_n(&l->failed, __ATOMIC_ACQUIRE) ? l->why : NULL;
}

void tls_link_end(struct tls_link *l, bool flush)
{
	struct timeval linger = { .tv_sec = TLS_LINGER_MS / TLS_MS_PER_S };
	uint8_t sink[TLS_RECORD_MAX];
	uint64_t reads = 0;

	if (!l)
		return;
	mig_io_detach(l->fd);
	/* A flush tells the peer the session ends, then reads what it still sends until it
	 * closes, a moment at most: closing with its bytes unread would reset the
	 * connection, and could cost it the last answer. */
	if (flush && gnutls_bye(l->s, GNUTLS_SHUT_WR) == GNUTLS_E_SUCCESS &&
	    setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &linger, sizeof(linger)) == 0)
		while (reads++ < TLS_LINGER_READS && gnutls_record_recv(l->s, sink, sizeof(sink)) > 0)
			;
	close(l->fd);
	tls_link_free(l);
}
