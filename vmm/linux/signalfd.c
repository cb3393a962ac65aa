/*
 * signalfd.c - signalfd4: the guest's pending signals read from a descriptor.
 *
 * Signals live in the personality's queues (signal.c), not in the host kernel, so a
 * host signalfd would never see them. A guest signalfd is a host pipe instead: the
 * guest's descriptors are its read end, and the monitor keeps one byte in it while a
 * signal of the signalfd's mask is pending, so the host's poll, select and epoll on
 * it (the guest's own calls, unchanged) see it readable exactly then. Every change to
 * the queues brings the byte up to date (lx_sigfd_sync). A read never reaches the
 * pipe: it takes signals of the mask out of the queues, as Linux's signalfd_read
 * does, and writes them as struct signalfd_siginfo.
 *
 * One difference from Linux, documented: Linux shows a signalfd readable when the
 * signal is pending for the thread that polls (its own or the process'); here it is
 * readable when one is pending for any thread, since the pipe is the same for all.
 *
 * A signalfd is found from a guest descriptor by the pipe's inode; the entry goes
 * when no guest descriptor has that pipe any more, noticed when a new one is made.
 */
#include "signalfd.h"
#include "call.h"
#include "fdtable.h"
#include "signal.h"

#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIGFD_FLAGS       (SFD_CLOEXEC | SFD_NONBLOCK)
#define SIGFD_BATCH       32 /* records read at most per call, as LX_SIGQUEUE_MAX */

/* ---- the table (p->lock held) ---- */

static bool sigfd_same_pipe(int host, const struct lx_sigfd *f)
{
	struct stat st;

	return fstat(host, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == f->dev &&
	       st.st_ino == f->ino;
}

/* The signalfd host descriptor @host is, or NULL. */
static struct lx_sigfd *sigfd_find(struct lx_proc *p, int host)
{
	struct stat st;

	if (!p->n_sigfds || fstat(host, &st) < 0 || !S_ISFIFO(st.st_mode))
		return NULL;
	for (int i = 0; i < LX_MAX_SIGFDS; i++)
		if (p->sigfds[i].used && p->sigfds[i].dev == st.st_dev &&
		    p->sigfds[i].ino == st.st_ino)
			return &p->sigfds[i];
	return NULL;
}

static void sigfd_free(struct lx_proc *p, struct lx_sigfd *f)
{
	close(f->rd);
	close(f->wr);
	*f = (struct lx_sigfd){ .rd = -1, .wr = -1 };
	__atomic_sub_fetch(&p->n_sigfds, 1, __ATOMIC_RELAXED); /* lx_sigfd_is reads it unlocked */
}

/* Signalfds no guest descriptor has any more go (a call still reading one finds it
 * gone and ends with EBADF, as if the descriptor had closed first). */
static void sigfd_collect(struct lx_proc *p)
{
	lx_fd_lock(p);
	for (int i = 0; i < LX_MAX_SIGFDS; i++) {
		struct lx_sigfd *f = &p->sigfds[i];
		bool held = false;

		for (int fd = 0; f->used && !held && fd < p->fdt.n_files; fd++)
			held = p->fdt.files[fd].host_fd >= 0 && sigfd_same_pipe(p->fdt.files[fd].host_fd, f);
		if (f->used && !held)
			sigfd_free(p, f);
	}
	lx_fd_unlock(p);
}

/* Signals pending anywhere in the process, for the readiness byte. */
static uint64_t sigfd_pending_any(const struct lx_proc *p)
{
	uint64_t set = p->sigpend.set;

	for (int i = 0; i < LX_MAX_THREADS; i++)
		if (p->sigthr[i].tid)
			set |= p->sigthr[i].pend.set;
	return set;
}

/* The byte of @f as its mask and @pending say. The monitor only takes the byte out
 * when it knows it is there, so its read never waits, whatever O_NONBLOCK the guest
 * set on the (shared) read end. */
static void sigfd_set_ready(struct lx_sigfd *f, uint64_t pending)
{
	bool ready = (pending & f->mask) != 0;
	char b = 0;
	int queued = 0;

	if (ready == f->ready)
		return;
	if (ready) {
		f->ready = write(f->wr, &b, 1) == 1;
		return;
	}
	if (ioctl(f->rd, FIONREAD, &queued) == 0 && queued > 0 && read(f->rd, &b, 1) == 1)
		f->ready = false;
}

void lx_sigfd_sync(struct lx_proc *p)
{
	uint64_t pending;

	if (!p->n_sigfds)
		return;
	pending = sigfd_pending_any(p);
	for (int i = 0; i < LX_MAX_SIGFDS; i++)
		if (p->sigfds[i].used)
			sigfd_set_ready(&p->sigfds[i], pending);
}

/* A new signalfd on @mask: *@host the guest's read end (the caller installs it). */
static int sigfd_new(struct lx_proc *p, uint64_t mask, int flags, int *host)
{
	struct lx_sigfd *f = NULL;
	struct stat st;
	int ends[2], rc;

	sigfd_collect(p);
	for (int i = 0; !f && i < LX_MAX_SIGFDS; i++)
		if (!p->sigfds[i].used)
			f = &p->sigfds[i];
	if (!f)
		return -EMFILE;
	if (pipe2(ends, O_CLOEXEC) < 0)
		return -errno;
	*host = fcntl(ends[0], F_DUPFD_CLOEXEC, 3);
	if (*host < 0 || fstat(ends[0], &st) < 0 || fcntl(ends[1], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(ends[0], F_SETFL, flags & SFD_NONBLOCK) < 0) {
		rc = -errno;
		if (*host >= 0)
			close(*host);
		close(ends[0]);
		close(ends[1]);
		return rc;
	}
	*f = (struct lx_sigfd){ .used = true, .dev = st.st_dev, .ino = st.st_ino,
				.mask = mask & ~LX_SIG_UNBLOCKABLE, .rd = ends[0], .wr = ends[1] };
	__atomic_add_fetch(&p->n_sigfds, 1, __ATOMIC_RELAXED);
	sigfd_set_ready(f, sigfd_pending_any(p));
	return 0;
}

int lx_sigfd_create(struct lx_proc *p, uint64_t mask, int flags, int *host)
{
	int rc;

	pthread_mutex_lock(&p->lock);
	rc = sigfd_new(p, mask, flags, host);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int lx_sigfd_mask(struct lx_proc *p, int host, uint64_t *mask, uint64_t *ino)
{
	struct lx_sigfd *f = sigfd_find(p, host);

	if (!f)
		return -EINVAL;
	*mask = f->mask;
	*ino = f->ino;
	return 0;
}

bool lx_sigfd_is(struct lx_proc *p, int host)
{
	bool is;

	/* Most programs have none: no lock and no fstat on their reads. */
	if (!__atomic_load_n(&p->n_sigfds, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&p->lock);
	is = sigfd_find(p, host) != NULL;
	pthread_mutex_unlock(&p->lock);
	return is;
}

bool lx_sigfd_is_locked(struct lx_proc *p, int host)
{
	return p->n_sigfds && sigfd_find(p, host) != NULL;
}

void lx_sigfd_fini(struct lx_proc *p)
{
	for (int i = 0; i < LX_MAX_SIGFDS; i++)
		if (p->sigfds[i].used)
			sigfd_free(p, &p->sigfds[i]);
}

/* ---- reading ---- */

/* @info as Linux's signalfd_copyinfo writes it: the fields its si_code's layout has. */
static void sigfd_record(const siginfo_t *info, struct signalfd_siginfo *r)
{
	int code = info->si_code, sig = info->si_signo;

	memset(r, 0, sizeof(*r));
	r->ssi_signo = (uint32_t)sig;
	r->ssi_errno = info->si_errno;
	r->ssi_code = code;
	if (code > SI_USER && code < SI_KERNEL) { /* raised by the kernel for a reason */
		if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
		    sig == SIGTRAP)
			r->ssi_addr = (uint64_t)(uintptr_t)info->si_addr;
		else if (sig == SIGCHLD) {
			r->ssi_pid = (uint32_t)info->si_pid;
			r->ssi_uid = info->si_uid;
			r->ssi_status = info->si_status;
		} else {
			r->ssi_pid = (uint32_t)info->si_pid;
			r->ssi_uid = info->si_uid;
		}
	} else if (code == SI_TIMER) {
		r->ssi_tid = (uint32_t)info->si_timerid;
		r->ssi_overrun = (uint32_t)info->si_overrun;
		r->ssi_ptr = (uint64_t)(uintptr_t)info->si_value.sival_ptr;
		r->ssi_int = info->si_value.sival_int;
	} else if (code < 0) { /* sigqueue, tkill and the like */
		r->ssi_pid = (uint32_t)info->si_pid;
		r->ssi_uid = info->si_uid;
		r->ssi_ptr = (uint64_t)(uintptr_t)info->si_value.sival_ptr;
		r->ssi_int = info->si_value.sival_int;
	} else { /* kill, or the kernel's own */
		r->ssi_pid = (uint32_t)info->si_pid;
		r->ssi_uid = info->si_uid;
	}
}

/* Up to @max signals of signalfd @host's mask taken for the calling thread into @out:
 * how many, or -EBADF when the signalfd went meanwhile. *@mask is its mask. */
static int sigfd_take(struct lx_call *c, int host, struct signalfd_siginfo *out, int max,
		      uint64_t *mask)
{
	struct lx_sigfd *f;
	siginfo_t info;
	int n = 0;

	pthread_mutex_lock(&c->p->lock);
	f = sigfd_find(c->p, host);
	if (f) {
		*mask = f->mask;
		while (n < max && lx_sig_take(c->t, *mask, &info))
			sigfd_record(&info, &out[n++]);
	}
	pthread_mutex_unlock(&c->p->lock);
	return f ? n : -EBADF;
}

/* @len bytes of @src spread over @iov (which has room for them). */
static void sigfd_scatter(const struct iovec *iov, int cnt, const void *src, size_t len)
{
	const char *s = src;

	for (int i = 0; i < cnt && len; i++) {
		size_t k = iov[i].iov_len < len ? iov[i].iov_len : len;

		memcpy(iov[i].iov_base, s, k);
		s += k;
		len -= k;
	}
}

int64_t lx_sigfd_read(struct lx_call *c, int host, const struct iovec *iov, int cnt)
{
	struct signalfd_siginfo rec[SIGFD_BATCH];
	uint64_t room = 0, mask = 0;
	int max, n, fl = fcntl(host, F_GETFL);

	for (int i = 0; i < cnt; i++)
		room += iov[i].iov_len;
	max = room / sizeof(rec[0]) > SIGFD_BATCH ? SIGFD_BATCH : (int)(room / sizeof(rec[0]));
	if (!max)
		return -EINVAL;
	/* As signalfd_dequeue: wait for the first only, and end when a signal the thread
	 * takes (outside the mask) is pending. */
	while ((n = sigfd_take(c, host, rec, max, &mask)) == 0) {
		if (fl >= 0 && (fl & O_NONBLOCK))
			return -EAGAIN;
		if (lx_sig_eintr(c, LX_ERESTARTSYS))
			return -LX_ERESTARTSYS;
		lx_sig_wait(c, mask | ~c->t->sigmask, NULL);
	}
	if (n < 0)
		return n;
	sigfd_scatter(iov, cnt, rec, (size_t)n * sizeof(rec[0]));
	return (int64_t)n * (int64_t)sizeof(rec[0]);
}

/* ---- the calls ---- */

/* The existing signalfd @fd takes @mask (Linux: EINVAL when @fd is not one). */
static int64_t sigfd_change(struct lx_call *c, int fd, uint64_t mask)
{
	struct lx_sigfd *f;
	int host;

	pthread_mutex_lock(&c->p->lock);
	host = lx_fd_host(c->p, fd);
	f = host < 0 ? NULL : sigfd_find(c->p, host);
	if (f) {
		f->mask = mask & ~LX_SIG_UNBLOCKABLE;
		lx_sigfd_sync(c->p);
	}
	pthread_mutex_unlock(&c->p->lock);
	if (host < 0)
		return host;
	return f ? fd : -EINVAL;
}

int64_t lx_signalfd(struct lx_call *c, int64_t fd, uint64_t umask, uint64_t size,
		    uint64_t flags)
{
	uint64_t mask;
	int host, rc;

	if (!lx_sig_on(c->p))
		return lx_unsupported(c);
	if (flags & ~(uint64_t)SIGFD_FLAGS)
		return -EINVAL;
	rc = lx_sigset_in(c, umask, size, &mask);
	if (rc)
		return rc;
	if ((int)fd != -1)
		return sigfd_change(c, (int)fd, mask);
	pthread_mutex_lock(&c->p->lock);
	rc = sigfd_new(c->p, mask, (int)flags, &host);
	if (!rc) {
		rc = lx_fd_install(c->p, host, 0, flags & SFD_CLOEXEC);
		if (rc < 0)
			close(host);
	}
	pthread_mutex_unlock(&c->p->lock);
	return rc;
}

/* (sys.h) The caller holds @parent's lock. */
int lx_sigfd_fork_dup(struct lx_proc *parent, int host, struct lx_proc *child, int *out)
{
	uint64_t mask, ino;
	int fl;

	if (!lx_sigfd_is_locked(parent, host)) {
		*out = fcntl(host, F_DUPFD_CLOEXEC, 3);
		return *out < 0 ? -errno : 0;
	}
	fl = fcntl(host, F_GETFL);
	if (fl < 0)
		return -errno;
	if (lx_sigfd_mask(parent, host, &mask, &ino))
		return -EINVAL;
	return lx_sigfd_create(child, mask, fl & O_NONBLOCK ? SFD_NONBLOCK : 0, out);
}
