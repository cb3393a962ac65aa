/*
 * fdtable.c - the guest's file descriptor numbers.
 *
 * A guest fd is an index into the personality's own table, never a host fd number:
 * the guest cannot name the monitor's KVM, socket or log descriptors, and closing its
 * stdout does not close ccvm's. Each slot holds a host descriptor the monitor owns.
 * The guest's stdin/stdout/stderr are duplicates of ccvm's.
 *
 * A system call that resolved a guest fd keeps using the host number after the table
 * lock is dropped, while other guest threads run: holds (per host descriptor, a count
 * with a "closed meanwhile" bit) make a guest close of a descriptor in use defer the
 * host close to the last user, so the number is never reused under a call.
 *
 * The table is an object with its own lock (p->fdt.lock), which every function here
 * takes itself: a read or write resolves its descriptor without the process's lock.
 * Where a caller holds p->lock too, it took that first.
 */
#include "fdtable.h"
#include "fastio.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FD_INITIAL_SLOTS 64
#define FD_HOLD_CLOSED   (1U << 31) /* the table let go while a call held it */

static int lx_fd_grow(struct lx_proc *p, int need)
{
	int n = p->fdt.n_files ? p->fdt.n_files : FD_INITIAL_SLOTS;
	struct lx_file *nf;

	while (n < need)
		n *= 2;
	if (n > LX_MAX_FDS)
		n = LX_MAX_FDS;
	if (n < need)
		return -EMFILE;
	nf = realloc(p->fdt.files, (size_t)n * sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	for (int i = p->fdt.n_files; i < n; i++)
		nf[i] = (struct lx_file){ .host_fd = -1, .std = -1 };
	p->fdt.files = nf;
	p->fdt.n_files = n;
	return 0;
}

/* Room in p->fdt.holds for host descriptor @host. */
static int lx_hold_room(struct lx_proc *p, int host)
{
	int n = p->fdt.n_holds ? p->fdt.n_holds : FD_INITIAL_SLOTS;
	uint32_t *nh;

	if (host < p->fdt.n_holds)
		return 0;
	while (n <= host)
		n *= 2;
	nh = realloc(p->fdt.holds, (size_t)n * sizeof(*nh));
	if (!nh)
		return -ENOMEM;
	memset(nh + p->fdt.n_holds, 0, (size_t)(n - p->fdt.n_holds) * sizeof(*nh));
	p->fdt.holds = nh;
	p->fdt.n_holds = n;
	return 0;
}

static int fdt_hold(struct lx_proc *p, int host)
{
	int rc = lx_hold_room(p, host);

	if (!rc)
		p->fdt.holds[host]++;
	return rc;
}

static void fdt_unhold(struct lx_proc *p, int host)
{
	if (host < 0 || host >= p->fdt.n_holds || !(p->fdt.holds[host] & ~FD_HOLD_CLOSED))
		return;
	if (--p->fdt.holds[host] == FD_HOLD_CLOSED) {
		p->fdt.holds[host] = 0;
		close(host);
	}
}

/* The table lets go of @host: closed now, or by the last call that holds it. */
static int lx_fd_drop_host(struct lx_proc *p, int host)
{
	if (host < p->fdt.n_holds && p->fdt.holds[host]) {
		p->fdt.holds[host] |= FD_HOLD_CLOSED;
		return 0;
	}
	/* Linux's close releases the descriptor even when the flush reports an error;
	 * report EIO-type errors but never EINTR (the descriptor is gone either way). */
	if (close(host) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

static int fdt_host(struct lx_proc *p, int fd)
{
	if (fd < 0 || fd >= p->fdt.n_files || p->fdt.files[fd].host_fd < 0)
		return -EBADF;
	return p->fdt.files[fd].host_fd;
}

/**
 * fdt_install - give host descriptor @host_fd the lowest free guest number >= @min_fd.
 * On success the table owns @host_fd; on failure the caller still does.
 * Returns the guest fd, -EMFILE past RLIMIT_NOFILE, or -ENOMEM.
 */
static int fdt_install(struct lx_proc *p, int host_fd, int min_fd, bool cloexec)
{
	uint64_t limit = p->rlim[RLIMIT_NOFILE].rlim_cur;
	int fd, rc;

	if (limit > LX_MAX_FDS)
		limit = LX_MAX_FDS;
	for (fd = min_fd; fd < p->fdt.n_files; fd++)
		if (p->fdt.files[fd].host_fd < 0)
			break;
	if ((uint64_t)fd >= limit)
		return -EMFILE;
	if (fd >= p->fdt.n_files) {
		rc = lx_fd_grow(p, fd + 1);
		if (rc)
			return rc;
	}
	p->fdt.files[fd] = (struct lx_file){ .host_fd = host_fd, .cloexec = cloexec, .std = -1 };
	return fd;
}

/* Remember how guest fd @fd was opened, so a restored VM can open it again (@fd is
 * in the table). */
static int fdt_set_origin(struct lx_proc *p, int fd, const char *path, int oflags, int std)
{
	struct lx_file *f = &p->fdt.files[fd];

	free(f->path);
	f->path = path ? strdup(path) : NULL;
	f->oflags = oflags;
	f->std = std;
	return path && !f->path ? -ENOMEM : 0;
}

static int fdt_close(struct lx_proc *p, int fd)
{
	int host = fdt_host(p, fd);

	if (host < 0)
		return host;
	lx_fastio_forget(p, fd);
	free(p->fdt.files[fd].path);
	p->fdt.files[fd] = (struct lx_file){ .host_fd = -1, .std = -1 };
	return lx_fd_drop_host(p, host);
}

/* A table with no descriptors open (a restore fills it). */
int lx_fd_init_empty(struct lx_proc *p)
{
	return lx_fd_grow(p, FD_INITIAL_SLOTS);
}

int lx_fd_init(struct lx_proc *p)
{
	int rc = lx_fd_grow(p, FD_INITIAL_SLOTS);

	if (rc)
		return rc;
	for (int fd = 0; fd < 3; fd++) {
		int host = fcntl(fd, F_DUPFD_CLOEXEC, 3);

		if (host >= 0) {
			p->fdt.files[fd].host_fd = host;
			p->fdt.files[fd].std = fd;
		}
	}
	return 0;
}

void lx_fd_fini(struct lx_proc *p)
{
	for (int fd = 0; fd < p->fdt.n_files; fd++) {
		if (p->fdt.files[fd].host_fd >= 0)
			close(p->fdt.files[fd].host_fd);
		free(p->fdt.files[fd].path);
	}
	/* No call runs any more: what a call still held after the table let go. */
	for (int h = 0; h < p->fdt.n_holds; h++)
		if (p->fdt.holds[h] & FD_HOLD_CLOSED)
			close(h);
	free(p->fdt.files);
	free(p->fdt.holds);
	p->fdt.files = NULL;
	p->fdt.holds = NULL;
	p->fdt.n_files = p->fdt.n_holds = 0;
}

/**
 * fdt_install_at - put @host_fd at guest number @fd, closing what was there
 * (dup2 semantics). Returns @fd, -EBADF past RLIMIT_NOFILE, or -ENOMEM.
 */
static int fdt_install_at(struct lx_proc *p, int host_fd, int fd, bool cloexec)
{
	uint64_t limit = p->rlim[RLIMIT_NOFILE].rlim_cur;
	int rc;

	if (fd < 0 || (uint64_t)fd >= limit || fd >= LX_MAX_FDS)
		return -EBADF;
	if (fd >= p->fdt.n_files) {
		rc = lx_fd_grow(p, fd + 1);
		if (rc)
			return rc;
	}
	if (p->fdt.files[fd].host_fd >= 0) {
		lx_fastio_forget(p, fd);
		lx_fd_drop_host(p, p->fdt.files[fd].host_fd);
	}
	free(p->fdt.files[fd].path);
	p->fdt.files[fd] = (struct lx_file){ .host_fd = host_fd, .cloexec = cloexec, .std = -1 };
	return fd;
}

/* fork's table (fdtable.h): every descriptor duplicated by @dup, so parent and child
 * share each open file (offset, status flags, locks) as on Linux. The caller holds
 * @parent's lock; the child is not running yet, so its table needs no lock. */
int lx_fd_fork(struct lx_proc *parent, struct lx_proc *child, lx_fd_dup_fn dup)
{
	int rc;

	pthread_mutex_lock(&parent->fdt.lock);
	rc = lx_fd_grow(child, parent->fdt.n_files);

	for (int fd = 0; !rc && fd < parent->fdt.n_files; fd++) {
		const struct lx_file *f = &parent->fdt.files[fd];
		struct lx_file *g = &child->fdt.files[fd];
		int host;

		if (f->host_fd < 0)
			continue;
		rc = dup(parent, f->host_fd, child, &host);
		if (rc)
			break;
		*g = *f;
		g->host_fd = host;
		g->path = f->path ? strdup(f->path) : NULL;
		if (f->path && !g->path)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&parent->fdt.lock);
	return rc;
}

/* ---- the table's functions: each under the table's own lock ---- */

int lx_fd_host(struct lx_proc *p, int fd)
{
	int host;

	pthread_mutex_lock(&p->fdt.lock);
	host = fdt_host(p, fd);
	pthread_mutex_unlock(&p->fdt.lock);
	return host;
}

int lx_fd_install(struct lx_proc *p, int host_fd, int min_fd, bool cloexec)
{
	int fd;

	pthread_mutex_lock(&p->fdt.lock);
	fd = fdt_install(p, host_fd, min_fd, cloexec);
	pthread_mutex_unlock(&p->fdt.lock);
	return fd;
}

int lx_fd_install_at(struct lx_proc *p, int host_fd, int fd, bool cloexec)
{
	int rc;

	pthread_mutex_lock(&p->fdt.lock);
	rc = fdt_install_at(p, host_fd, fd, cloexec);
	pthread_mutex_unlock(&p->fdt.lock);
	return rc;
}

int lx_fd_close(struct lx_proc *p, int fd)
{
	int rc;

	pthread_mutex_lock(&p->fdt.lock);
	rc = fdt_close(p, fd);
	pthread_mutex_unlock(&p->fdt.lock);
	return rc;
}

int lx_fd_set_origin(struct lx_proc *p, int fd, const char *path, int oflags, int std)
{
	int rc = -EBADF;

	pthread_mutex_lock(&p->fdt.lock);
	if (fd >= 0 && fd < p->fdt.n_files)
		rc = fdt_set_origin(p, fd, path, oflags, std);
	pthread_mutex_unlock(&p->fdt.lock);
	return rc;
}

void lx_fd_copy_origin(struct lx_proc *p, int from, int to)
{
	pthread_mutex_lock(&p->fdt.lock);
	if (from >= 0 && from < p->fdt.n_files && to >= 0 && to < p->fdt.n_files) {
		const struct lx_file *f = &p->fdt.files[from];

		fdt_set_origin(p, to, f->path, f->oflags, f->std);
	}
	pthread_mutex_unlock(&p->fdt.lock);
}

int lx_fd_cloexec(struct lx_proc *p, int fd, int set)
{
	int rc = -EBADF;

	pthread_mutex_lock(&p->fdt.lock);
	if (fdt_host(p, fd) >= 0) {
		if (set >= 0)
			p->fdt.files[fd].cloexec = set;
		rc = p->fdt.files[fd].cloexec;
	}
	pthread_mutex_unlock(&p->fdt.lock);
	return rc;
}

void lx_fd_close_range(struct lx_proc *p, int first, int last, bool cloexec_only)
{
	pthread_mutex_lock(&p->fdt.lock);
	for (int fd = first; fd >= 0 && fd <= last && fd < p->fdt.n_files; fd++) {
		if (p->fdt.files[fd].host_fd < 0)
			continue;
		if (cloexec_only)
			p->fdt.files[fd].cloexec = true;
		else
			fdt_close(p, fd);
	}
	pthread_mutex_unlock(&p->fdt.lock);
}

void lx_fd_close_on_exec(struct lx_proc *p)
{
	pthread_mutex_lock(&p->fdt.lock);
	for (int fd = 0; fd < p->fdt.n_files; fd++)
		if (p->fdt.files[fd].host_fd >= 0 && p->fdt.files[fd].cloexec)
			fdt_close(p, fd);
	pthread_mutex_unlock(&p->fdt.lock);
}

void lx_fd_lock(struct lx_proc *p)
{
	pthread_mutex_lock(&p->fdt.lock);
}

void lx_fd_unlock(struct lx_proc *p)
{
	pthread_mutex_unlock(&p->fdt.lock);
}

/* ---- a call's descriptors (fdtable.h) ---- */

/* Remember that @c holds @host (the table's lock held). */
static int lx_call_note(struct lx_call *c, int host)
{
	if (!c->held) {
		c->held = c->held_inline;
		c->cap_held = LX_CALL_HOLDS;
	}
	if (c->n_held == c->cap_held) {
		int *more = malloc(2 * (size_t)c->cap_held * sizeof(*more));

		if (!more)
			return -ENOMEM;
		memcpy(more, c->held, (size_t)c->n_held * sizeof(*more));
		if (c->held != c->held_inline)
			free(c->held);
		c->held = more;
		c->cap_held *= 2;
	}
	c->held[c->n_held++] = host;
	return 0;
}

/* The host descriptor behind guest fd @fd, or -EBADF; it stays open until the call
 * returns (fdtable.c, holds). */
int lx_host_fd(struct lx_call *c, uint64_t fd)
{
	int host, rc;

	if (fd > INT_MAX)
		return -EBADF;
	pthread_mutex_lock(&c->p->fdt.lock);
	host = fdt_host(c->p, (int)fd);
	if (host >= 0) {
		rc = fdt_hold(c->p, host);
		if (!rc && (rc = lx_call_note(c, host)))
			fdt_unhold(c->p, host);
		if (rc)
			host = rc;
	}
	pthread_mutex_unlock(&c->p->fdt.lock);
	return host;
}

void lx_call_release(struct lx_call *c)
{
	if (c->span.listed) /* a block without its end: never left on the list */
		gmem_wait_end(c->p->mem, &c->span);
	if (!c->n_held)
		return;
	pthread_mutex_lock(&c->p->fdt.lock);
	for (int i = 0; i < c->n_held; i++)
		fdt_unhold(c->p, c->held[i]);
	pthread_mutex_unlock(&c->p->fdt.lock);
	if (c->held != c->held_inline)
		free(c->held);
	c->held = NULL;
	c->n_held = c->cap_held = 0;
}

int lx_install(struct lx_call *c, int host, int min_fd, bool cloexec)
{
	int fd;

	fd = lx_fd_install(c->p, host, min_fd, cloexec);
	if (fd < 0)
		close(host);
	return fd;
}

int lx_install_pair(struct lx_call *c, int host[2], bool cloexec, int *fds)
{
	int g0, g1;

	g0 = lx_install(c, host[0], 0, cloexec);
	if (g0 < 0) {
		close(host[1]);
		return g0;
	}
	g1 = lx_install(c, host[1], 0, cloexec);
	if (g1 < 0) {
		lx_fd_close(c->p, g0);
		return g1;
	}
	fds[0] = g0;
	fds[1] = g1;
	return 0;
}
