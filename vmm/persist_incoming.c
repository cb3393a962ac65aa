/*
 * persist_incoming.c - a VM restored from a migration stream (docs/migration.md):
 * `ccvm restore --incoming unix:PATH | tcp:ADDR:PORT`.
 *
 * It listens, takes one connection, reads the hello (the RAM size, which --mem must
 * match when given), makes the VM, and reads frames: memory straight into the first
 * process's RAM, each frame checked before it lands (snapshot/migstream.c), state
 * sections kept until the end. There the sections are checked and the VM rebuilt
 * exactly as from an image (restore_read_sections, restore_vm_state): the stream is
 * data, never policy, and the destination's own command line confines the guest. The
 * sender hears READY once the VM is built and RUNNING as it starts; any refusal goes
 * back to it with its reason, and the destination exits nonzero.
 *
 * With --tls-creds the stream comes over TLS (vmm/tls.c) and nothing else is taken: a
 * plain stream hears why it is refused, and a source that fails the handshake or
 * --tls-authz is logged and dropped, the listener waiting on for the one it expects.
 */
#include "persist_incoming.h"
#include "persist_restore.h"
#include "persist_tree.h"
#include "control.h"
#include "migrate.h"
#include "tls.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "vm.h"
#include "../snapshot/image.h"
#include "../snapshot/migrecv.h"
#include "../snapshot/migstream.h"
#include "../base/bits.h"
#include "../base/pages.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define INCOMING_SECTIONS 16 /* distinct state sections a stream may carry */
#define INCOMING_ERR      512
#define INCOMING_UNIX_MODE 0600 /* a unix: listener: its owner's alone */
#define INCOMING_POPULATE_PIECE (64ULL << 20) /* a plan is faulted in this much at a time */
#define INCOMING_NS_PER_MS 1000000ULL
#define INCOMING_LINGER_S 2 /* a refused source's silence awaited before the close */

struct incoming_section {
	uint32_t type;
	uint8_t *data;
	size_t len;
};

struct incoming {
	struct incoming_section sec[INCOMING_SECTIONS];
	int n;
	struct tree_placed placed; /* the windows section's records, in place as they came */
	struct lx_shm_in shm;      /* the shared memory section's memfds, made as it came */
};

static int incoming_section(void *ctx, uint32_t type, void **data, size_t *len)
{
	struct incoming *in = ctx;

	for (int i = 0; i < in->n; i++) {
		if (in->sec[i].type != type)
			continue;
		*len = in->sec[i].len;
		*data = in->sec[i].len ? malloc(in->sec[i].len) : NULL;
		if (in->sec[i].len && !*data)
			return -EIO;
		if (*data)
			memcpy(*data, in->sec[i].data, in->sec[i].len);
		return 0;
	}
	return -ENOENT;
}

/* The windows section's records, in guest memory already (tree_place_records): there
 * is one once a tree came (none: a VM of one process). */
static int incoming_windows_read(void *ctx, uint64_t off, void *buf, size_t n)
{
	return tree_placed_read(&((struct incoming *)ctx)->placed, off, buf, n);
}

static int incoming_in_place(void *ctx, uint32_t type, size_t *len,
			     int (**read)(void *ctx, uint64_t off, void *buf, size_t n))
{
	struct incoming *in = ctx;
	bool tree = in->placed.n > 0;

	for (int i = 0; i < in->n; i++)
		tree |= in->sec[i].type == IMG_SEC_TREE;
	if (type != IMG_SEC_WINDOWS || !tree)
		return -ENOENT;
	*len = tree_placed_len(&in->placed);
	*read = incoming_windows_read;
	return 0;
}

static void incoming_free(struct incoming *in)
{
	for (int i = 0; i < in->n; i++)
		free(in->sec[i].data);
	in->n = 0;
	tree_placed_free(&in->placed);
	lx_shm_in_free(&in->shm);
}

/* A section of the stream kept (its data taken over); a windows section's records put
 * in place at once (the source sends them a block at a time, as many as --mem-total
 * allows), and shared memory's pieces made into memfds as they come. 0, or why not in
 * @err: a second section of a type, more than a stream may carry, a bad record. */
static int incoming_keep(struct incoming *in, struct mig_event *ev, char *err, size_t errlen)
{
	if (ev->at == IMG_SEC_WINDOWS)
		return tree_place_records(&in->placed, ev->data, ev->len, err, errlen);
	if (ev->at == IMG_SEC_SHM)
		return lx_shm_in_put(&in->shm, ev->data, ev->len, err, errlen);
	for (int i = 0; i < in->n; i++)
		if (in->sec[i].type == ev->at)
			return log_set_err(-EPROTO, err, errlen, "section %llu sent twice",
					   (unsigned long long)ev->at);
	if (in->n == INCOMING_SECTIONS)
		return log_set_err(-EPROTO, err, errlen, "more than %d sections",
				   INCOMING_SECTIONS);
	in->sec[in->n++] = (struct incoming_section){ .type = (uint32_t)ev->at, .data = ev->data,
						      .len = ev->len };
	ev->data = NULL;
	return 0;
}

/* A listening socket at @where (migrate_addr): the fd, or -errno with why in @err. */
static int incoming_listen(const char *where, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc = migrate_addr(where, &ss, &sl, err, errlen), fd, one = 1;

	if (rc)
		return rc;
	if (ss.ss_family == AF_UNIX) /* (a live socket or another file: bind refuses) */
		ctl_clear_stale(((struct sockaddr_un *)&ss)->sun_path);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_set_err(-errno, err, errlen, "--incoming: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* A unix: socket is the owner's alone before it listens (until then a connect is
	 * refused), whatever the umask: bind makes it, chmod narrows it, listen opens it. */
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 ||
	    (ss.ss_family == AF_UNIX && chmod(((struct sockaddr_un *)&ss)->sun_path,
					     INCOMING_UNIX_MODE) < 0) ||
	    listen(fd, 1) < 0) {
		rc = -errno;
		close(fd);
		return log_set_err(rc, err, errlen, "--incoming %s: %s", where, strerror(-rc));
	}
	return fd;
}

/* Until a source connects. ccvm blocks the signals a guest is to get (sigfwd.c), but
 * there is no guest yet: TERM, INT and the like end the wait, as they end any other
 * command (their default actions, with none of them blocked while it waits). */
static void incoming_wait(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	sigset_t none;

	sigemptyset(&none);
	while (ppoll(&p, 1, NULL, &none) < 0 && errno == EINTR)
		;
}

/* A unix: peer may bring a VM only if it runs as this user or as root (the control
 * socket's rule): the socket's mode says as much, and this holds even where the mode
 * was changed behind ccvm's back. A TCP peer is whoever reached the address. */
static bool incoming_peer_ok(int fd, const char *where)
{
	return strncmp(where, "unix:", 5) != 0 || ctl_peer_allowed(fd, "--incoming");
}

/* The TLS session of the migration, once a source passed it; NULL without TLS. */
static struct tls_link *incoming_link;

/* The stream's connection closed; over TLS, the session's end said first. */
static void incoming_close(int fd)
{
	if (incoming_link)
		tls_link_end(incoming_link, true);
	else
		close(fd);
	incoming_link = NULL;
}

/* A source that sends a plain stream to a TLS destination hears why it is refused.
 * Whether the first bytes on @fd are a plain stream's (they are left there). */
static bool incoming_plain_stream(int fd)
{
	char magic[sizeof(MIG_MAGIC) - 1];
	ssize_t n;

	do
		n = recv(fd, magic, sizeof(magic), MSG_PEEK | MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(magic) && memcmp(magic, MIG_MAGIC, sizeof(magic)) == 0;
}

/* A refused connection closed so that the source reads why (an answer, a TLS alert)
 * rather than a reset: no more is sent, and what it still sends is read and dropped
 * until it closes, for a moment at most. */
static void incoming_drop(int fd)
{
	struct timeval linger = { .tv_sec = INCOMING_LINGER_S };
	uint64_t end = mono_ns() + INCOMING_LINGER_S * 1000 * INCOMING_NS_PER_MS;
	char sink[4096];
	ssize_t n;

	shutdown(fd, SHUT_WR);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &linger, sizeof(linger));
	do /* (at most the moment in all: a source that sends on is cut) */
		n = read(fd, sink, sizeof(sink));
	while ((n > 0 || (n < 0 && errno == EINTR)) && mono_ns() < end);
	close(fd);
}

/* The TLS session on the connection @fd (its handshake bounded by --peer-timeout), the
 * source checked against --tls-authz: 0, or -errno with why in @err (@fd closed, the
 * source told where it can be). */
static int incoming_tls(int fd, const struct restore_opts *o, char *err, size_t errlen)
{
	int rc = mig_bound(fd, o->peer_timeout_s);
	struct tls_link *l = NULL;

	if (!rc && incoming_plain_stream(fd)) {
		mig_send_ack(fd, MIG_ACK_REFUSED, "this destination takes the stream over TLS "
			     "only: give ctl migrate --tls-creds DIR");
		rc = log_set_err(-EPROTO, err, errlen, "a plain stream, refused (--tls-creds)");
	}
	if (!rc)
		rc = tls_link_start(o->tls, TLS_SERVER, fd, NULL, o->peer_timeout_s, &l, err,
				    errlen);
	if (rc) {
		incoming_drop(fd);
		return rc;
	}
	rc = tls_link_authorize(l, o->tls_authz, err, errlen);
	if (rc) {
		mig_send_ack(fd, MIG_ACK_REFUSED, err);
		tls_link_end(l, true);
		return rc;
	}
	log_info("--incoming: TLS with %s", tls_link_peer(l)[0] ? tls_link_peer(l) : "the source");
	incoming_link = l;
	return 0;
}

/* One connection on @where from an allowed peer (over TLS with --tls-creds), the
 * listener gone once it came. */
static int incoming_accept(const char *where, const struct restore_opts *o, char *err,
			   size_t errlen)
{
	int lfd = incoming_listen(where, err, errlen), fd;
	char why[MIG_ERR_LEN];

	if (lfd < 0)
		return lfd;
	log_info("waiting for a migration on %s%s", where, o->tls ? " (TLS)" : "");
	for (;;) {
		incoming_wait(lfd);
		do
			fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		while (fd < 0 && errno == EINTR);
		if (fd >= 0 && !incoming_peer_ok(fd, where)) {
			close(fd);
			continue;
		}
		if (fd < 0 || !o->tls)
			break;
		if (incoming_tls(fd, o, why, sizeof(why)) == 0)
			break;
		log_err("--incoming %s: a source refused: %s; waiting on", where, why);
	}
	if (fd < 0)
		log_set_err(-errno, err, errlen, "--incoming %s: %s", where, strerror(errno));
	close(lfd);
	if (strncmp(where, "unix:", 5) == 0)
		unlink(where + 5);
	return fd < 0 ? -EIO : fd;
}

/* The plan of pre-copy (@pages, a bit per page of @ram): that memory faulted in, then
 * PREPARED. Only before any memory came: a plan is a promise about what is to come.
 * Faulting in is advice; where the host refuses it the pages fault in as they land.
 * It takes seconds a GiB on some hosts: it goes a piece at a time, with a BUSY to the
 * source every MIG_BUSY_EVERY_MS, whose bound on this side's silence is shorter. */
static int incoming_plan(struct mig_in *mi, struct gmem *ram, const uint64_t *pages,
			 bool memory_came, char *err, size_t errlen)
{
	const uint64_t piece = INCOMING_POPULATE_PIECE / PAGE_SIZE;
	uint64_t n = ram->size / PAGE_SIZE, faulted = 0, said = mono_ns();
	int rc = 0, sent = 0;

	if (memory_came)
		return log_set_err(-EPROTO, err, errlen, "a plan after memory");
	for (uint64_t at = 0, e; !rc && !sent && (e = bits_run(pages, &at, n, true)) > at;
	     at = e) {
		if (e - at > piece)
			e = at + piece;
		rc = gmem_populate(ram, at * PAGE_SIZE, (e - at) * PAGE_SIZE);
		faulted += rc ? 0 : e - at;
		if (mono_ns() - said >= MIG_BUSY_EVERY_MS * INCOMING_NS_PER_MS) {
			sent = mig_send_ack(mi->fd, MIG_ACK_BUSY, NULL);
			said = mono_ns();
		}
	}
	if (sent) /* the source is gone or stuck: the next read says which */
		return 0;
	if (rc)
		log_info("--incoming: memory not faulted in ahead (%s)", strerror(-rc));
	log_debug("--incoming: %llu pages faulted in for the rounds",
		  (unsigned long long)faulted);
	return mig_send_ack(mi->fd, MIG_ACK_PREPARED, NULL);
}

/* Frames until the end, or the switch to post-copy (its bitmap of stale pages in
 * *@stale): memory into @ram, sections into @in. */
static int incoming_read(struct mig_in *mi, struct gmem *ram, struct incoming *in,
			 uint8_t **stale, uint64_t *stale_len, char *err, size_t errlen)
{
	bool memory_came = false;
	struct mig_event ev;
	int rc;

	for (;;) {
		rc = mig_next(mi, &ev, err, errlen);
		memory_came |= ev.type == MIG_PAGES || ev.type == MIG_HOLES;
		if (!rc && ev.type == MIG_SECTION)
			rc = incoming_keep(in, &ev, err, errlen);
		if (!rc && ev.type == MIG_PLAN)
			rc = incoming_plan(mi, ram, (const uint64_t *)ev.data, memory_came, err,
					   errlen);
		if (!rc && ev.type == MIG_POSTCOPY) {
			*stale = ev.data;
			*stale_len = ev.len; /* 0: nothing stale */
			return 0;
		}
		free(ev.data);
		if (rc || ev.type == MIG_END)
			return rc;
	}
}

/* Post-copy: the stream and its threads, from the switch to the last page. */
static struct mig_in incoming_mi = { .fd = -1 };
static struct mig_postcopy *incoming_pc;

/* After the switch, the source is gone: the VM cannot go on. */
static void incoming_lost(void *ctx)
{
	vm_stop(ctx, 1);
}

/* The switch: the rest of the memory comes on its own threads from now on. */
static int incoming_postcopy(struct vm *vm, uint64_t *have, uint8_t *stale, uint64_t stale_len,
			     char *err, size_t errlen)
{
	int rc;

	__atomic_store_n(&vm->postcopy, true, __ATOMIC_RELEASE);
	rc = mig_postcopy_start(&incoming_mi, &(struct mig_postcopy_target){
					.mem = &vm->ram, .on_lost = incoming_lost, .ctx = vm,
					.filling = &vm->postcopy },
				have, stale_len ? (const uint64_t *)stale : NULL, &incoming_pc);
	if (rc) {
		__atomic_store_n(&vm->postcopy, false, __ATOMIC_RELEASE);
		return log_set_err(rc, err, errlen, "post-copy: %s", strerror(-rc));
	}
	log_info("post-copy: the VM runs before its memory is all here");
	return 0;
}

/* An answer to the source, through post-copy's lock once it runs. */
static int incoming_ack(int fd, enum mig_ack_code code, const char *why)
{
	return incoming_pc && code != MIG_ACK_REFUSED ? mig_postcopy_ack(incoming_pc, code) :
						       mig_send_ack(fd, code, why);
}

void incoming_end(void)
{
	if (!incoming_pc)
		return;
	if (mig_postcopy_finish(incoming_pc))
		log_err("post-copy did not finish: the VM's memory never all came");
	incoming_pc = NULL;
	incoming_close(incoming_mi.fd);
	mig_in_close(&incoming_mi);
	incoming_mi.fd = -1;
}

int restore_vm_incoming(const char *where, const struct restore_opts *o, struct vm *vm,
			uint64_t *mono_ns, int *conn)
{
	struct incoming in = { .n = 0 };
	struct restore_saved st = { 0 };
	struct mig_in *mi = &incoming_mi;
	char err[INCOMING_ERR] = "";
	uint64_t ram = 0, *have = NULL, stale_len = 0;
	uint8_t *stale = NULL;
	int fd = incoming_accept(where, o, err, sizeof(err)), rc;

	if (fd < 0) {
		log_err("cannot take a migration: %s", err);
		return fd;
	}
	rc = mig_bound(fd, o->peer_timeout_s);
	if (rc)
		snprintf(err, sizeof(err), "--peer-timeout: %s", strerror(-rc));
	else
		rc = mig_in_open(mi, fd, NULL, o->mem, &ram, err, sizeof(err));
	if (!rc && (rc = restore_vm_create(vm, ram, o)))
		snprintf(err, sizeof(err), "cannot make the VM: %s", strerror(-rc));
	if (!rc && !(have = calloc((ram / PAGE_SIZE + 63) / 64, sizeof(uint64_t))))
		rc = -ENOMEM;
	in.placed.vm = vm;
	lx_shm_in_init(&in.shm, img_section_max(IMG_SEC_SHM, ram));
	if (!rc) {
		mi->mem = vm->ram.host;
		mi->have = have;
		rc = incoming_read(mi, &vm->ram, &in, &stale, &stale_len, err, sizeof(err));
	}
	if (!rc && stale) {
		rc = incoming_postcopy(vm, have, stale, stale_len, err, sizeof(err));
		have = NULL; /* taken over, or freed */
	}
	if (!rc) {
		const struct restore_src src = { .section = incoming_section,
						 .in_place = incoming_in_place, .ctx = &in,
						 .ram_size = ram };

		rc = restore_read_sections(&src, &st, err, sizeof(err));
		if (!rc)
			rc = lx_shm_in_end(&in.shm, &st.shm_made, err, sizeof(err));
	}
	if (!rc && (rc = restore_vm_state(where, &st, o, vm, mono_ns)))
		snprintf(err, sizeof(err), "the VM could not be rebuilt (the log says why)");
	log_info("migration from %s: %llu bytes received before it runs", where,
		 (unsigned long long)mi->bytes_read);
	restore_saved_free(&st);
	incoming_free(&in);
	free(stale);
	free(have);
	mi->have = NULL;
	if (rc) {
		log_err("migration refused: %s", err);
		incoming_ack(fd, MIG_ACK_REFUSED, err);
		if (incoming_pc) {
			mig_postcopy_abort(incoming_pc);
			incoming_end();
			return rc;
		}
		mig_in_close(mi);
		incoming_close(fd);
		return rc;
	}
	incoming_ack(fd, MIG_ACK_READY, NULL);
	if (!incoming_pc)
		mig_in_close(mi);
	*conn = fd;
	return 0;
}

void incoming_running(int conn, bool started)
{
	if (conn < 0)
		return;
	if (started)
		incoming_ack(conn, MIG_ACK_RUNNING, NULL);
	else if (incoming_pc)
		mig_postcopy_abort(incoming_pc);
	if (!incoming_pc)
		incoming_close(conn); /* post-copy still reads it: incoming_end closes it */
}
