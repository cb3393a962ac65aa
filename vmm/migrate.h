/*
 * migrate.h - the sending side of a live migration (migrate.c; docs/migration.md).
 */
#ifndef CCVM_MIGRATE_H
#define CCVM_MIGRATE_H

#include "../snapshot/codec.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct vm;

#define MIG_ERR_LEN 640 /* room for a destination's reason and what came before it */

/* "unix:PATH" or "tcp:ADDR:PORT" (ADDR IPv4) as a socket address: 0, or -EINVAL with
 * why in @err. The receiving side listens on the same (persist_incoming.c). */
int migrate_addr(const char *where, struct sockaddr_storage *ss, socklen_t *sl, char *err,
		 size_t errlen);

struct migrate_figures {
	uint64_t bytes_sent;
	uint64_t downtime_ms;    /* from the pause to the destination's RUNNING */
	uint64_t pages, holes;
};

/* Send @vm to the destination listening at @where ("unix:PATH" or "tcp:ADDR:PORT"):
 * the VM paused, its memory and state sent with @codec, and 0 once the destination
 * said RUNNING, the VM left paused for its caller to end (it runs there now). Any
 * failure before that resumes it here: -errno with why in @err. */
int migrate_send(struct vm *vm, const char *where, enum img_codec codec,
		 struct migrate_figures *fig, char *err, size_t errlen);

#endif
