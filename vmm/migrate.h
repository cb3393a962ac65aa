/*
 * migrate.h - the sending side of a live migration (migrate.c; docs/migration.md).
 */
#ifndef CCVM_MIGRATE_H
#define CCVM_MIGRATE_H

#include "../snapshot/migsend.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct vm;
struct tracker;
struct tls_creds;

#define MIG_ERR_LEN 640 /* room for a destination's reason and what came before it */
#define MIGRATE_DOWNTIME_MS_DEFAULT 300
#define MIGRATE_DOWNTIME_MS_MAX     60000
#define MIGRATE_ROUNDS_MAX          1000
/* --peer-timeout: the longest either side of a migration waits on the other for
 * anything (a byte taken or sent, an answer) before it gives up with that error. Far
 * above what a live peer is silent for (a destination at long work says BUSY every
 * second); the same default and range on both sides. */
#define MIGRATE_PEER_TIMEOUT_S_DEFAULT 60
#define MIGRATE_PEER_TIMEOUT_S_MAX     86400

/* "unix:PATH" or "tcp:ADDR:PORT" (ADDR IPv4, or IPv6 in brackets) as a socket address: 0, or -EINVAL with
 * why in @err. The receiving side listens on the same (persist_incoming.c). */
int migrate_addr(const char *where, struct sockaddr_storage *ss, socklen_t *sl, char *err,
		 size_t errlen);
/* Whether @where may carry a migration: unix: always (its peer is checked when it
 * connects); tcp: with @tls (--tls-creds), or with @insecure to a loopback address only.
 * 0, or -EINVAL/-EPERM with why in @err (starting with @where). */
int migrate_channel_check(const char *where, bool insecure, bool tls, char *err,
			  size_t errlen);
/* The host of a tcp: @where as a certificate would name it ("127.0.0.1", "::1"); "" for
 * unix:. */
void migrate_host(const char *where, char *host, size_t len);

struct migrate_figures {
	uint64_t ram_size;
	uint64_t bytes_sent;
	uint64_t downtime_ms;    /* from the pause to the destination's RUNNING */
	uint64_t total_ms;       /* from the connection to RUNNING */
	uint64_t rounds;         /* pre-copy rounds made (0: stop and copy) */
	uint64_t pages_precopied;/* pages sent while the VM ran */
	uint64_t pages_paused;   /* pages sent in the pause */
	uint64_t pages, holes;
	uint64_t requests;       /* post-copy: blocks the destination asked for */
	bool precopy;
	bool postcopy;           /* the destination ran before all memory was there */
	bool lost;               /* post-copy failed after the destination started */
};

/* --postcopy: never, when pre-copy does not converge, or at once. */
enum migrate_postcopy { MIGRATE_POSTCOPY_NEVER, MIGRATE_POSTCOPY_AUTO, MIGRATE_POSTCOPY_NOW };

/* The order round 0 sends regions in. */
enum migrate_order { MIGRATE_ORDER_COVERAGE, MIGRATE_ORDER_ADDRESS };

/* One migration: what the caller sets, then what migrate_send keeps while it runs. */
struct migration {
	const char *where;          /* "unix:PATH" or "tcp:ADDR:PORT" */
	enum img_codec codec;
	uint64_t downtime_ms;       /* the pause aimed at */
	unsigned max_rounds;        /* 0: the rounds' own limit */
	bool stop_copy;             /* no rounds: pause, then send it all (--max-rounds 0) */
	enum migrate_postcopy postcopy;
	uint64_t bandwidth;         /* bytes/s while the VM runs; 0: as fast as it goes */
	enum migrate_order order;
	unsigned peer_timeout_s;    /* the destination's silence allowed (--peer-timeout) */
	struct tracker *tracker;    /* coverage and page heat; NULL: address order */
	const struct tls_creds *tls;/* --tls-creds (the client's); NULL: no TLS */
	const char *authz;          /* --tls-authz: the destination names accepted */
	void (*progress)(void *ctx, const struct mig_progress *p);
	void *ctx;
	/* Kept by migrate_send; migrate_cancel reaches them from another thread. */
	bool cancel;
	int fd;
	pthread_mutex_t lock;
};

/* @m ready for migrate_send, its fields zeroed but for the defaults. */
void migrate_init(struct migration *m);
void migrate_fini(struct migration *m);

/*
 * migrate_send - send @vm to the destination listening at m->where: pre-copy rounds
 * while it runs (every page that holds data, cold regions first, then what was
 * written since, until what is left fits m->downtime_ms or stops shrinking), then the
 * pause, the rest, the vCPU and process state, and 0 once the destination said
 * RUNNING: the VM is left paused for its caller to end (it runs there now). Without
 * a dirty log, stop and copy. With post-copy (m->postcopy now, or auto when the rounds
 * did not converge), the destination runs once the state is there, and the rest of
 * the memory follows, what it asks for first. Any failure before RUNNING resumes the
 * VM here: -errno with why in @err; one after it in post-copy loses the VM
 * (fig->lost), which stays paused for its caller to end.
 */
int migrate_send(struct migration *m, struct vm *vm, struct migrate_figures *fig, char *err,
		 size_t errlen);

/* From another thread: the running migrate_send gives up soon (-ECANCELED). */
void migrate_cancel(struct migration *m);

#endif
