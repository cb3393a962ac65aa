/*
 * fuzz_tls.c - libFuzzer target: the destination's side of a TLS migration channel
 * (vmm/tls.c) before it trusts anything. The first byte picks what the rest is:
 *   0: what a source sends first, handed to a TLS server with PSK credentials (the
 *      ClientHello and whatever follows, up to the handshake's end or its failure);
 *   1: the same against x509 credentials given as garbage PEM, which must be refused
 *      before any byte is read;
 *   2: a keys.psk file's text, parsed and checked.
 * A handshake the input completes would need the key: it must fail, and never hang.
 */
#include "../../vmm/tls.h"
#include "../../base/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_TLS_MAX (48 << 10) /* fits the socket pair's buffer: written before reading */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_psk[] = "source:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";

static void fuzz_handshake(const uint8_t *data, size_t size, struct tls_creds *c)
{
	struct tls_link *l = NULL;
	int sv[2], buf = 1 << 20;
	char err[512];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (size && write(sv[0], data, size) != (ssize_t)size)
		abort();
	shutdown(sv[0], SHUT_WR); /* then the stream ends: no wait for more */
	if (tls_link_start(c, TLS_SERVER, sv[1], NULL, 1, &l, err, sizeof(err)) == 0)
		abort(); /* no handshake completes without the key */
	close(sv[1]);
	close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tls_creds c = { .psk = NULL };
	char err[512];

	log_set_level(LOG_ERR);
	if (!size || size > FUZZ_TLS_MAX)
		return 0;
	if (data[0] == 0) {
		c.psk = fuzz_psk;
		fuzz_handshake(data + 1, size - 1, &c);
	} else if (data[0] == 1) {
		char *pem = strndup((const char *)data + 1, size - 1);

		c.ca = c.cert = c.key = pem;
		if (pem && tls_creds_check(&c, TLS_SERVER, err, sizeof(err)) == 0)
			fuzz_handshake(NULL, 0, &c);
		free(pem);
	} else if (data[0] == 2) {
		c.psk = strndup((const char *)data + 1, size - 1);
		if (c.psk)
			tls_creds_check(&c, TLS_CLIENT, err, sizeof(err));
		free(c.psk);
	}
	return 0;
}
