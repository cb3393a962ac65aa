/*
 * tls.h - a migration channel over TLS (GnuTLS): credentials from --tls-creds DIR, and
 * a link that carries the stream's plain socket over an authenticated, encrypted
 * session (tls.c; docs/migration.md, "TLS").
 */
#ifndef CCVM_TLS_H
#define CCVM_TLS_H

#include <stdbool.h>
#include <stddef.h>

#define TLS_FILE_MAX  (64 << 10) /* a credentials file's bytes at most */
#define TLS_NAME_MAX  256        /* a peer's name (CN, PSK user) kept for messages */
#define TLS_AUTHZ_MAX 1024       /* --tls-authz's list, bytes */

enum tls_role { TLS_CLIENT, TLS_SERVER }; /* the migration's source, its destination */

/* What --tls-creds DIR holds, in memory: x509 (QEMU's names: ca-cert.pem, and
 * server-cert.pem and server-key.pem, or client-cert.pem and client-key.pem, by role)
 * or keys.psk ("name:hexkey" lines; a client uses the first). Each NUL-terminated,
 * malloc'd, or NULL. */
struct tls_creds {
	char *ca, *cert, *key;
	char *psk;
};

/* Read DIR's files for @role into @c: 0, or -errno with why in @err. Nothing else is
 * kept open. tls_creds_check: whether GnuTLS takes them (PEM, the key matches its
 * certificate, the PSK lines well formed). */
int tls_creds_read(const char *dir, enum tls_role role, struct tls_creds *c, char *err,
		   size_t errlen);
int tls_creds_check(const struct tls_creds *c, enum tls_role role, char *err, size_t errlen);
void tls_creds_free(struct tls_creds *c);

/* --tls-authz: a comma-separated list of names, each 1 to TLS_NAME_MAX - 1 bytes. */
bool tls_authz_ok(const char *list);

struct tls_link;

/*
 * tls_link_start - the TLS handshake on the connected socket @fd as @role, every wait
 * bounded by @timeout_s, then the link: *@plain is a socket the caller reads and writes
 * as the stream (it may set its own time bound, shut it down, close it), relayed over
 * the session by two threads from tls_link_run until tls_link_end.
 *
 * x509: both sides show a certificate signed by ca-cert.pem. A client given @host (the
 * address it dialled) checks that the server's certificate is for it; a server takes
 * any client certificate its CA signed. PSK: both hold the key of the client's name.
 *
 * Returns 0, or -errno with why in @err: -EACCES for credentials refused (by either
 * side), -EPROTO for a peer that does not speak TLS, -ETIMEDOUT, -ECONNRESET. @fd is
 * the caller's to close on failure; on success the link owns it.
 */
int tls_link_start(const struct tls_creds *c, enum tls_role role, int fd, const char *host,
		   unsigned timeout_s, struct tls_link **out, int *plain, char *err,
		   size_t errlen);

/* The relays' threads started: 0, or -EAGAIN with why in @err. Separate from the start
 * for a destination, which confines itself on the stream's first bytes: Landlock binds
 * only the threads that come after (vmm/confine.c). tls_link_prefill: before that, at
 * least @n bytes of what the peer sends moved into the pair on the caller's thread; 0,
 * or -ETIMEDOUT, -ECONNRESET with why in @err. */
int tls_link_run(struct tls_link *l, char *err, size_t errlen);
int tls_link_prefill(struct tls_link *l, size_t n, char *err, size_t errlen);

/* --tls-authz: 0 when the peer's name (a certificate's CN or one of its DNS names, or
 * the PSK user) is in @authz, or -EACCES with why in @err. */
int tls_link_authorize(const struct tls_link *l, const char *authz, char *err, size_t errlen);

/* The peer's name as the handshake showed it, for messages. */
const char *tls_link_peer(const struct tls_link *l);

/* Why the session failed under the stream (an alert from the peer, a bad record), once
 * the stream saw its input end: NULL if it did not. */
const char *tls_link_failure(const struct tls_link *l);

/* After the caller closed *plain: with @flush, what it wrote goes out and the peer's
 * close is awaited a moment (so that a last answer is read there, not reset); without,
 * the connection is cut now. The threads joined, the socket closed, @l freed. */
void tls_link_end(struct tls_link *l, bool flush);

#endif
