/*
 * migrate.c - the sending side of a live migration (docs/migration.md): `ccvm ctl SOCK
 * migrate unix:PATH|tcp:ADDR:PORT`.
 *
 * Pre-copy: while the VM runs, every page of the first process's memory that holds
 * data goes over the stream (snapshot/migstream.c), cold regions first by the coverage
 * tracker and hot ones last, then round after round the pages the dirty log and the
 * monitor's marks say were written since (snapshot/precopy.c, the rounds --precopy
 * rounds snapshots make, aimed at a socket instead of a file). When what is left
 * would go in under the downtime target, or the rounds stop converging, the VM
 * pauses: the rest, then the state sections an image would hold (vCPUs, processes,
 * the other processes' memory, shared memory), then the end. Only after the
 * destination's RUNNING does the VM stay paused for good, for its caller to end: it
 * runs there now. Anything else (no destination, a cut connection, REFUSED with its
 * reason, a cancel) resumes the VM here.
 *
 * Post-copy (--postcopy now, or auto when the rounds did not converge): at the pause
 * the state goes at once with the switch frame, the destination runs, and the source
 * answers its page requests while pushing the rest, hot regions first
 * (snapshot/migsend.c). Once the destination said RUNNING a failure loses the VM.
 * At the switch the guest's listening sockets let go of their ports (still bound, out
 * of LISTEN) for a destination on this host; a failure before RUNNING has them listen
 * again.
 */
#include "migrate.h"
#include "persist_capture.h"
#include "../base/log.h"
#include "../base/mono.h"
#include "../base/pages.h"
#include "tls.h"
#include "vm.h"
#include "linux/lx.h"
#include "../snapshot/image.h"
#include "../snapshot/migstream.h"
#include "../snapshot/migsend.h"
#include "../mmu/tracker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MIGRATE_NS_PER_MS 1000000ULL
#define MIGRATE_LISTENERS 64 /* guest listening sockets a switch lets go of, at most */
#define MIGRATE_RECORD_MAX (HUGE_SIZE + 64) /* a streamed record: a block and its place */

int migrate_addr(const char *where, struct sockaddr_storage *ss, socklen_t *sl, char *err,
		 size_t errlen)
{
	memset(ss, 0, sizeof(*ss));
	if (strncmp(where, "unix:", 5) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;

		if (!where[5] || strlen(where + 5) >= sizeof(un->sun_path))
			return log_set_err(-EINVAL, err, errlen, "%s: a socket path of 1 to %zu "
					   "bytes", where, sizeof(un->sun_path) - 1);
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, where + 5);
		*sl = sizeof(*un);
		return 0;
	}
	if (strncmp(where, "tcp:", 4) == 0) {
		if (lx_net_parse_hostport(where + 4, ss, sl))
			return log_set_err(-EINVAL, err, errlen, "%s: tcp:ADDR:PORT, ADDR an IPv4 "
					   "address or [an IPv6 one], PORT 1 to 65535", where);
		return 0;
	}
	return log_set_err(-EINVAL, err, errlen, "%s: unix:PATH or tcp:ADDR:PORT", where);
}

int migrate_channel_check(const char *where, bool insecure, bool tls, char *err,
			  size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc = migrate_addr(where, &ss, &sl, err, errlen);

	if (!rc && insecure && tls)
		return log_set_err(-EINVAL, err, errlen, "%s: --tls-creds or --insecure, not both",
				   where);
	if (rc || ss.ss_family == AF_UNIX || tls)
		return rc;
	if (!insecure)
		return log_set_err(-EPERM, err, errlen, "%s: over TCP the stream would be neither "
				   "authenticated nor encrypted: give --tls-creds DIR (docs/migration.md), "
				   "or --insecure for a loopback address", where);
	if (!lx_net_is_loopback((const struct sockaddr *)&ss))
		return log_set_err(-EPERM, err, errlen, "%s: --insecure is for loopback addresses "
				   "only (127.0.0.0/8, [::1]): anyone on the way could read or rewrite "
				   "the VM", where);
	return 0;
}

void migrate_host(const char *where, char *host, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char err[MIG_ERR_LEN];
	const void *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;

	host[0] = '\0';
	if (migrate_addr(where, &ss, &sl, err, sizeof(err)) || ss.ss_family == AF_UNIX)
		return;
	if (ss.ss_family == AF_INET)
		a = &((struct sockaddr_in *)&ss)->sin_addr;
	if (!inet_ntop(ss.ss_family, a, host, (socklen_t)len))
		host[0] = '\0';
}

void migrate_init(struct migration *m)
{
	memset(m, 0, sizeof(*m));
	m->codec = IMG_CODEC_AUTO;
	m->downtime_ms = MIGRATE_DOWNTIME_MS_DEFAULT;
	m->peer_timeout_s = MIGRATE_PEER_TIMEOUT_S_DEFAULT;
	m->fd = -1;
	pthread_mutex_init(&m->lock, NULL);
}

void migrate_fini(struct migration *m)
{
	pthread_mutex_destroy(&m->lock);
}

void migrate_cancel(struct migration *m)
{
	__atomic_store_n(&m->cancel, true, __ATOMIC_RELEASE);
	pthread_mutex_lock(&m->lock);
	if (m->fd >= 0)
		shutdown(m->fd, SHUT_RDWR); /* a send or a wait for the answer ends now */
	pthread_mutex_unlock(&m->lock);
}

/* A connection to @where, every wait on it bounded by @bound_s (the connect too: it
 * gives up with EINPROGRESS when the bound passes). */
static int migrate_connect(const char *where, unsigned bound_s, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc = migrate_addr(where, &ss, &sl, err, errlen), fd;

	if (rc)
		return rc;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_set_err(-errno, err, errlen, "no socket for %s: %s", where,
				   strerror(errno));
	rc = mig_bound(fd, bound_s);
	if (!rc && connect(fd, (struct sockaddr *)&ss, sl) < 0)
		rc = -errno;
	if (!rc)
		return fd;
	close(fd);
	if (rc == -EINPROGRESS)
		return log_set_err(-ETIMEDOUT, err, errlen, "no destination at %s: it did not "
				   "accept within %u s (--peer-timeout)", where, bound_s);
	return log_set_err(rc, err, errlen, "no destination at %s: %s", where, strerror(-rc));
}

/* What a running migration keeps between its steps. */
struct migrate_run {
	struct migration *m;
	struct vm *vm;
	struct mig_out o;
	struct mig_precopy p;
	bool rounds;             /* a dirty log for pre-copy (and the coverage order) */
	bool ran;                /* the rounds ran (not stop and copy, not post-copy now) */
	uint64_t t_running_ns;   /* post-copy: when the destination said RUNNING */
	int listeners[MIGRATE_LISTENERS]; /* host sockets that stopped listening */
	int n_listeners;
};

/* A streamed section's record (a block of a tree's windows) sent as it comes, as a
 * section of its own that the destination puts in place at once: a tree's memory is
 * never gathered on either side. */
struct migrate_sink {
	struct mig_out *o;
	uint8_t *buf;
};

static int migrate_record(void *ctx, uint32_t type, const void *head, size_t head_len,
			  const void *data, size_t len)
{
	struct migrate_sink *k = ctx;

	if (head_len + len > MIGRATE_RECORD_MAX)
		return -E2BIG;
	if (!k->buf && !(k->buf = malloc(MIGRATE_RECORD_MAX)))
		return -ENOMEM;
	if (head_len) /* (a piece after a record's first has no head) */
		memcpy(k->buf, head, head_len);
	if (len)
		memcpy(k->buf + head_len, data, len);
	return mig_send_section(k->o, type, k->buf, head_len + len);
}

/* The state sections captured now; then the guest's listeners let go of their ports
 * (for a destination on this host to listen on them); the sections sent, then the
 * end (@end), or nothing (post-copy: its frame follows). */
static int migrate_state(struct migrate_run *run, bool end, char *err, size_t errlen)
{
	struct migrate_sink sink = { .o = &run->o };
	struct img_writer *w = NULL;
	int rc = img_sections_open(run->vm->ram.size, &w);
	const void *data;
	uint32_t type;
	size_t len;

	if (!rc)
		img_sections_sink(w, migrate_record, &sink);
	if (!rc && (rc = capture_vm_sections(run->vm, w)))
		log_set_err(rc, err, errlen, "capturing the VM's state: %s", strerror(-rc));
	if (!rc && run->vm->proc)
		run->n_listeners = lx_tree_listeners_stop(run->vm->proc, run->listeners,
							  MIGRATE_LISTENERS);
	for (int i = 0; !rc && img_section_get(w, i, &type, &data, &len) == 0; i++)
		rc = mig_send_section(&run->o, type, data, len);
	if (!rc && end)
		rc = mig_send_end(&run->o);
	img_forget(w);
	free(sink.buf);
	return rc;
}

/* The destination's answers until @want (PREPARED after the plan; RUNNING after the
 * end, READY coming first): 0, or why not in @err. */
static int migrate_answers(const struct migration *m, int fd, enum mig_ack_code want,
			   char *err, size_t errlen)
{
	char why[MIG_WHY_MAX];
	enum mig_ack_code code;
	int rc;

	for (;;) {
		rc = mig_read_ack(fd, &code, why);
		if (rc && __atomic_load_n(&m->cancel, __ATOMIC_ACQUIRE))
			return log_set_err(-ECANCELED, err, errlen, "cancelled");
		if (rc == -ETIMEDOUT)
			return log_set_err(rc, err, errlen, "the destination said nothing for %u s "
					   "(--peer-timeout)", m->peer_timeout_s);
		if (rc)
			return log_set_err(rc, err, errlen, "the destination did not answer (%s)",
					   strerror(-rc));
		if (code == MIG_ACK_REFUSED)
			return log_set_err(-EPROTO, err, errlen, "the destination refused: %s", why);
		if (code == want)
			return 0;
	}
}

/* Why a send failed, for the user. */
static int migrate_send_err(int rc, const struct migration *m, char *err, size_t errlen)
{
	if (rc == -EPIPE || rc == -ECONNRESET)
		return log_set_err(rc, err, errlen, "sending to %s: the destination hung up (%s)",
				   m->where, strerror(-rc));
	if (rc == -ETIMEDOUT)
		return log_set_err(rc, err, errlen, "sending to %s: the destination took nothing "
				   "for %u s (--peer-timeout)", m->where, m->peer_timeout_s);
	return log_set_err(rc, err, errlen, "sending to %s: %s", m->where, strerror(-rc));
}

static int migrate_writers_pause(void *ctx)
{
	return vm_pause(ctx);
}

static void migrate_writers_resume(void *ctx)
{
	vm_resume(ctx);
}

/* The pre-copy set up over the VM's dirty log (the tracker's, or KVM's own without
 * one): 0 with run->rounds false when there is none, or --max-rounds 0 (stop and copy). */
static int migrate_precopy_init(struct migrate_run *run)
{
	const struct migration *m = run->m;
	const struct mig_precopy_opts opts = {
		.coverage = m->order == MIGRATE_ORDER_COVERAGE, .max_rounds = m->max_rounds,
		.bandwidth = m->bandwidth, .progress = m->progress, .ctx = m->ctx,
	};
	struct tracker_log log = { .ops = NULL };
	int rc;

	if (m->tracker)
		log = m->tracker->log;
	else if (vm_dirty_log(run->vm, &log))
		log.ops = NULL;
	if (m->stop_copy || !log.ops)
		return 0;
	rc = mig_precopy_init(&run->p, &run->vm->ram, m->tracker, &log, &run->o, &opts);
	run->rounds = !rc;
	return rc;
}

/* Post-copy, the destination runs: the guest's connections here end now (clients
 * would wait on this paused copy until the push ends, seconds for gigabytes). */
static void migrate_let_go(void *ctx)
{
	struct migrate_run *run = ctx;
	int n = lx_tree_conns_shutdown(run->vm->proc);

	if (n)
		log_info("post-copy: the destination runs; %d TCP connection(s) of the guest "
			 "closed here", n);
}

/* Post-copy, the VM paused: the pages the destination may lack (all that hold data,
 * or what the rounds left), the state, the switch, then the push and its answers. */
static int migrate_postcopy(struct migrate_run *run, struct migrate_figures *fig, char *err,
			    size_t errlen)
{
	uint64_t words = (run->vm->ram.size / PAGE_SIZE + 63) / 64;
	uint64_t *need = calloc(words, sizeof(uint64_t));
	char why[MIG_WHY_MAX] = "";
	struct mig_push_state st = { .on_running = migrate_let_go, .ctx = run };
	int64_t n = need ? 0 : -ENOMEM;
	int rc;

	fig->postcopy = true;
	if (!n)
		n = run->ran ? rounds_left(&run->p.r, need) :
			       mig_resident_bitmap(run->vm->ram.host, run->vm->ram.size, need);
	for (uint64_t i = 0; n == 0 && i < words; i++)
		fig->pages_paused += (uint64_t)__builtin_popcountll(need[i]);
	rc = n < 0 ? (int)n : migrate_state(run, false, err, errlen);
	if (!rc) /* pages sent in the rounds and written since are stale there */
		rc = mig_send_postcopy(&run->o, run->ran ? need : NULL,
				       run->ran ? words * sizeof(uint64_t) : 0);
	if (!rc)
		rc = mig_postcopy_push(&run->o, run->vm->ram.host, need,
				       run->rounds ? &run->p : NULL, &st, why);
	free(need);
	run->t_running_ns = st.t_running_ns;
	fig->requests = st.requests;
	fig->lost = rc && st.running;
	if (rc == -EPROTO && why[0])
		return log_set_err(rc, err, errlen, "the destination refused: %s", why);
	if (fig->lost)
		return log_set_err(rc, err, errlen, "post-copy to %s failed after the destination "
				   "started (%s): the VM is lost", run->m->where, strerror(-rc));
	if (rc && !err[0])
		migrate_send_err(rc, run->m, err, errlen);
	return rc;
}

/* Before the rounds (or the stop and copy): the pages that hold data, and the
 * destination's word that their memory is faulted in. Fresh memory is slow to first
 * touch on a host like ours (huge pages: ~10 us a page), and a round 0 paced by it
 * lasts long enough for the guest to write again most of what it sent; a pause paced
 * by it is longer. Not for post-copy now: its destination needs those pages absent. */
static int migrate_plan(struct migrate_run *run, char *err, size_t errlen)
{
	uint64_t words = (run->vm->ram.size / PAGE_SIZE + 63) / 64;
	uint64_t *pages = calloc(words, sizeof(uint64_t));
	int rc = pages ? mig_resident_bitmap(run->vm->ram.host, run->vm->ram.size, pages) :
			 -ENOMEM;

	if (!rc)
		rc = mig_send_plan(&run->o, pages, words * sizeof(uint64_t));
	free(pages);
	if (rc)
		return migrate_send_err(rc, run->m, err, errlen);
	return migrate_answers(run->m, run->o.fd, MIG_ACK_PREPARED, err, errlen);
}

/* Everything up to the destination's answer; the VM paused when it returns 0. */
static int migrate_steps(struct migrate_run *run, struct migrate_figures *fig, uint64_t *t_pause,
			 char *err, size_t errlen)
{
	struct migration *m = run->m;
	int rc = migrate_precopy_init(run);
	bool post, now = m->postcopy == MIGRATE_POSTCOPY_NOW;

	if (!rc && !now)
		rc = migrate_plan(run, err, errlen);
	if (rc)
		return err[0] ? rc : migrate_send_err(rc, m, err, errlen);
	if (run->rounds && !now) {
		if (m->tracker)
			tracker_hold(m->tracker, true);
		run->ran = true;
		rc = mig_precopy_rounds(&run->p, &(struct rounds_writers){
						.pause = migrate_writers_pause,
						.resume = migrate_writers_resume, .ctx = run->vm },
					m->downtime_ms * MIGRATE_NS_PER_MS, &m->cancel);
		fig->rounds = run->p.r.rounds;
		fig->pages_precopied = run->p.r.pages_sent;
		if (rc == -ECANCELED)
			return log_set_err(rc, err, errlen, "cancelled");
	}
	if (rc)
		return migrate_send_err(rc, m, err, errlen);
	*t_pause = mono_ns();
	if (vm_pause(run->vm))
		return log_set_err(-ESRCH, err, errlen, "the VM has stopped");
	post = now || (m->postcopy == MIGRATE_POSTCOPY_AUTO && run->ran && !run->p.r.converged);
	if (post)
		return migrate_postcopy(run, fig, err, errlen);
	rc = run->ran ? mig_precopy_rest(&run->p) :
			mig_send_resident(&run->o, run->vm->ram.host, run->vm->ram.size);
	fig->pages_paused = run->ran ? run->p.pages_paused : run->o.pages_sent;
	if (!rc)
		rc = migrate_state(run, true, err, errlen);
	if (rc && !err[0])
		migrate_send_err(rc, m, err, errlen);
	return rc ? rc : migrate_answers(m, run->o.fd, MIG_ACK_RUNNING, err, errlen);
}

/* With --tls-creds, the session over the connection @fd: 0, or -errno with why in @err
 * (@fd closed). The destination is checked by its address, or by --tls-authz. */
static int migrate_tls(struct migration *m, int fd, struct tls_link **link, char *err,
		       size_t errlen)
{
	char host[INET6_ADDRSTRLEN] = "", why[MIG_ERR_LEN];
	int rc;

	if (!m->authz)
		migrate_host(m->where, host, sizeof(host));
	rc = tls_link_start(m->tls, TLS_CLIENT, fd, host[0] ? host : NULL, m->peer_timeout_s,
			    link, why, sizeof(why));
	if (rc)
		close(fd);
	else if ((rc = tls_link_authorize(*link, m->authz, why, sizeof(why)))) {
		tls_link_end(*link, false);
		*link = NULL;
	}
	return rc ? log_set_err(rc, err, errlen, "%s: %s", m->where, why) : 0;
}

/* The connection to the destination, over TLS with --tls-creds: its fd (the cancel's
 * to shut down), or -errno with why in @err. */
static int migrate_open(struct migration *m, struct tls_link **link, char *err, size_t errlen)
{
	int fd = migrate_connect(m->where, m->peer_timeout_s, err, errlen), rc;

	*link = NULL;
	if (fd < 0 || !m->tls)
		return fd;
	pthread_mutex_lock(&m->lock);
	m->fd = fd; /* a cancel cuts the handshake */
	pthread_mutex_unlock(&m->lock);
	rc = migrate_tls(m, fd, link, err, errlen);
	pthread_mutex_lock(&m->lock);
	m->fd = -1;
	pthread_mutex_unlock(&m->lock);
	if (rc && __atomic_load_n(&m->cancel, __ATOMIC_ACQUIRE))
		return log_set_err(-ECANCELED, err, errlen, "cancelled");
	return rc ? rc : fd;
}

int migrate_send(struct migration *m, struct vm *vm, struct migrate_figures *fig, char *err,
		 size_t errlen)
{
	struct migrate_run run = { .m = m, .vm = vm, .o = { .fd = -1 } };
	uint64_t t0 = mono_ns(), t_pause = 0;
	struct tls_link *link;
	int fd, rc;
	bool paused;

	memset(fig, 0, sizeof(*fig));
	fig->ram_size = vm->ram.size;
	fd = migrate_open(m, &link, err, errlen);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&m->lock);
	m->fd = fd;
	pthread_mutex_unlock(&m->lock);
	rc = mig_out_open(&run.o, fd, vm->ram.size, m->codec, codec_default_level(m->codec));
	if (!rc)
		rc = migrate_steps(&run, fig, &t_pause, err, errlen);
	else
		migrate_send_err(rc, m, err, errlen);
	paused = t_pause && rc != -ESRCH;
	if (rc && rc != -EPROTO && rc != -ECANCELED && rc != -ETIMEDOUT && !fig->lost &&
	    !fig->postcopy) {
		/* A destination that refused said why: its answer wins over a cut write. (Not
		 * after a wait that ran out: it would wait that long again.) */
		char why[MIG_WHY_MAX] = "";

		if (migrate_answers(m, fd, MIG_ACK_RUNNING, why, sizeof(why)) == -EPROTO)
			snprintf(err, errlen, "%s", why);
		else if (tls_link_failure(link)) /* the session ended under the stream */
			snprintf(err, errlen, "%s: %s", m->where, tls_link_failure(link));
	}
	if (run.ran) {
		mig_precopy_end(&run.p);
		if (m->tracker)
			tracker_hold(m->tracker, false);
	}
	mig_precopy_fini(&run.p);
	fig->precopy = run.ran;
	fig->bytes_sent = run.o.bytes_sent;
	fig->pages = run.o.pages_sent;
	fig->holes = run.o.holes_sent;
	fig->downtime_ms = !t_pause ? 0 : ((run.t_running_ns ? run.t_running_ns : mono_ns()) -
					   t_pause) / MIGRATE_NS_PER_MS;
	fig->total_ms = (mono_ns() - t0) / MIGRATE_NS_PER_MS;
	mig_out_close(&run.o);
	pthread_mutex_lock(&m->lock);
	m->fd = -1;
	if (link) /* (the destination's answer came, or nothing will) */
		tls_link_end(link, false);
	else
		close(fd);
	pthread_mutex_unlock(&m->lock);
	if (rc && paused && !fig->lost) { /* the VM goes on here */
		lx_listeners_resume(run.listeners, run.n_listeners);
		vm_resume(vm);
	}
	return rc;
}
