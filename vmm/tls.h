/*
 * tls.h - a migration channel over TLS (GnuTLS): credentials from --tls-creds DIR, and
 * a link that carries the migration stream on a socket over an authenticated, encrypted
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
 * bounded by @timeout_s, then the link: from now on the migration stream's reads and
 * writes on @fd (snapshot/migstream.c) go through the session, until tls_link_end.
 * The caller may still bound, poll and shut down @fd.
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
		   unsigned timeout_s, struct tls_link **out, char *err, size_t errlen);

/* --tls-authz: 0 when the peer's name (a certificate's CN or one of its DNS names, or
 * the PSK user) is in @authz, or -EACCES with why in @err. */
int tls_link_authorize(const struct tls_link *l, const char *authz, char *err, size_t errlen);

/* The peer's name as the handshake showed it, for messages. */
const char *tls_link_peer(const struct tls_link *l);

/* Why the session failed under the stream (an alert from the peer, a bad record), once
 * a read of the stream met it: NULL if none did. */
const char *tls_link_failure(const struct tls_link *l);

/* The end of the link and of its connection: with @flush, the session's close is said
 * and the peer's awaited a moment (so that a last answer is read there, not reset);
 * without, the connection is cut now. The socket closed, @l freed. */
void tls_link_end(struct tls_link *l, bool flush);

#endif
