/*
 * sys_file.c - the file system calls on descriptors: read, write, close, seek, stat of
 * a descriptor, sync, fcntl, dup, pipes, ioctl and directory reads.
 *
 * Data moves straight between host descriptors and guest RAM: a read(2) for the guest
 * is a host read(2) into the checked host address of the guest's buffer, with no copy
 * in between. Host calls that may wait (terminals, pipes, locks) are bracketed with
 * lx_wait_begin/end so a pause of the VM need not wait for them. The calls that name a
 * path are sys_path.c's.
 */
#include "sys.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define LX_MAX_RW        0x7ffff000ULL /* Linux caps one read/write at this */
#define LX_IOV_MAX       1024
#define LX_TERMIOS_SIZE  36  /* struct termios as the kernel's TCGETS fills it */
#define LX_IOCTL_ARG_MAX 64  /* the largest ioctl argument passed through (termios) */

/* Guest buffer for a data transfer of @len bytes; a zero length needs no buffer. */
static int lx_buf(struct lx_call *c, uint64_t gva, uint64_t *len, void **buf)
{
	if (*len > LX_MAX_RW)
		*len = LX_MAX_RW;
	if (*len == 0) {
		*buf = NULL;
		return 0;
	}
	*buf = lx_uptr(c, gva, *len);
	return *buf ? 0 : -EFAULT;
}

static int64_t lx_rw(struct lx_call *c, bool is_write, bool positional)
{
	uint64_t len = c->a[2];
	int host = lx_host_fd(c, c->a[0]);
	void *buf;
	long r;
	int rc;

	if (host < 0)
		return host;
	rc = lx_buf(c, c->a[1], &len, &buf);
	if (rc)
		return rc;
	if (positional && (int64_t)c->a[3] < 0)
		return -EINVAL;
	if (!positional && !is_write && lx_sigfd_is(c->p, host))
		return lx_sigfd_read(c, host, &(struct iovec){ .iov_base = buf, .iov_len = len }, 1);
	if (!positional) {
		/* A socket on the exitless path: bytes read ahead come first, and bytes
		 * written earlier without an exit go out before these. */
		struct iovec v = { .iov_base = buf, .iov_len = len };
		int64_t got = is_write ? lx_fastio_before_write(c, (int)c->a[0], false) :
					 lx_fastio_take(c->p, (int)c->a[0], &v, 1, false);

		if (got)
			return got;
	}
	lx_wait_begin(c);
	do {
		if (positional)
			r = is_write ? pwrite(host, buf, len, (off_t)c->a[3]) :
				       pread(host, buf, len, (off_t)c->a[3]);
		else
			r = is_write ? (long)write(host, buf, len) : (long)read(host, buf, len);
		rc = r < 0 ? -errno : 0;
	} while (rc == -EINTR && !(rc = lx_sig_eintr(c, LX_ERESTARTSYS)));
	lx_wait_end(c);
	return rc ? rc : r;
}

int64_t sys_read(struct lx_call *c)
{
	return lx_rw(c, false, false);
}

int64_t sys_write(struct lx_call *c)
{
	return lx_rw(c, true, false);
}

int64_t sys_pread64(struct lx_call *c)
{
	return lx_rw(c, false, true);
}

int64_t sys_pwrite64(struct lx_call *c)
{
	return lx_rw(c, true, true);
}

static int64_t lx_rwv(struct lx_call *c, bool is_write)
{
	uint64_t cnt = c->a[2], total = 0;
	int host = lx_host_fd(c, c->a[0]);
	struct iovec iov[LX_IOV_MAX];
	long r;
	int err;

	if (host < 0)
		return host;
	if (cnt > LX_IOV_MAX)
		return -EINVAL;
	if (cnt == 0)
		return 0;
	/* The guest's iovecs have the host's layout: copied once, then translated in place. */
	if (lx_copy_in(c, iov, c->a[1], cnt * sizeof(*iov)))
		return -EFAULT;
	for (uint64_t i = 0; i < cnt; i++) {
		uint64_t base = (uint64_t)(uintptr_t)iov[i].iov_base, len = iov[i].iov_len;

		if (len > LX_MAX_RW - total)
			len = LX_MAX_RW - total;
		iov[i].iov_len = len;
		iov[i].iov_base = len ? lx_uptr(c, base, len) : NULL;
		if (len && !iov[i].iov_base)
			return -EFAULT;
		total += len;
	}
	if (!is_write && lx_sigfd_is(c->p, host))
		return lx_sigfd_read(c, host, iov, (int)cnt);
	r = is_write ? lx_fastio_before_write(c, (int)c->a[0], false) :
		       lx_fastio_take(c->p, (int)c->a[0], iov, (int)cnt, false);
	if (r)
		return r;
	lx_wait_begin(c);
	do {
		r = is_write ? writev(host, iov, (int)cnt) : readv(host, iov, (int)cnt);
		err = r < 0 ? -errno : 0;
	} while (err == -EINTR && !(err = lx_sig_eintr(c, LX_ERESTARTSYS)));
	lx_wait_end(c);
	return err ? err : r;
}

int64_t sys_readv(struct lx_call *c)
{
	return lx_rwv(c, false);
}

int64_t sys_writev(struct lx_call *c)
{
	return lx_rwv(c, true);
}

int64_t sys_close(struct lx_call *c)
{
	int rc;

	if (c->a[0] > INT_MAX)
		return -EBADF;
	pthread_mutex_lock(&c->p->lock);
	rc = lx_fd_close(c->p, (int)c->a[0]);
	pthread_mutex_unlock(&c->p->lock);
	return rc;
}

/* close_range(first, last, flags): the guest's descriptors in the range closed, or
 * marked close-on-exec (CLOSE_RANGE_CLOEXEC). Every process has a table of its own,
 * so CLOSE_RANGE_UNSHARE asks for nothing more. */
int64_t sys_close_range(struct lx_call *c)
{
	uint64_t first = (uint32_t)c->a[0], last = (uint32_t)c->a[1];
	uint64_t flags = c->a[2];
	struct lx_proc *p = c->p;

	if (flags & ~(uint64_t)(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) || first > last)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	lx_fd_close_range(p, (int)first, last > INT_MAX ? INT_MAX : (int)last,
			  flags & CLOSE_RANGE_CLOEXEC);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int64_t sys_lseek(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);

	if (host < 0)
		return host;
	return host_ret(lseek(host, (off_t)c->a[1], (int)c->a[2]));
}

int64_t sys_fstat(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);
	struct stat *st = lx_uptr(c, c->a[1], sizeof(struct stat));

	if (host < 0)
		return host;
	if (!st)
		return -EFAULT;
	return host_ret(fstat(host, st));
}

int64_t sys_fstatfs(struct lx_call *c)
{
	struct statfs *st = lx_uptr(c, c->a[1], sizeof(struct statfs));
	int host = lx_host_fd(c, c->a[0]);

	if (host < 0)
		return host;
	if (!st)
		return -EFAULT;
	return host_ret(fstatfs(host, st));
}

/* Advice only: passed to the host file. */
int64_t sys_fadvise64(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);

	if (host < 0)
		return host;
	return -posix_fadvise(host, (off_t)c->a[1], (off_t)c->a[2], (int)c->a[3]);
}

int64_t sys_ftruncate(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);
	int64_t rc;

	if (host < 0)
		return host;
	if ((int64_t)c->a[1] < 0)
		return -EINVAL;
	if (!lx_shm_is_memfd(host))
		return host_ret(ftruncate(host, (off_t)c->a[1]));
	/* A memfd a process maps may not shrink under the mapping (shm.c says why). */
	lx_shm_lock();
	rc = lx_shm_may_truncate(c->p, host, c->a[1]);
	if (!rc)
		rc = host_ret(ftruncate(host, (off_t)c->a[1]));
	lx_shm_unlock();
	return rc;
}

static int64_t lx_sync(struct lx_call *c, bool data_only)
{
	int host = lx_host_fd(c, c->a[0]);
	int rc;

	if (host < 0)
		return host;
	lx_wait_begin(c);
	rc = (int)host_ret(data_only ? fdatasync(host) : fsync(host));
	lx_wait_end(c);
	return rc;
}

int64_t sys_fsync(struct lx_call *c)
{
	return lx_sync(c, false);
}

int64_t sys_fdatasync(struct lx_call *c)
{
	return lx_sync(c, true);
}

/* Writing back part of a file (Redis calls it every few MiB of a dump): the host
 * file's own, with the guest's range and flags, which the host kernel checks. */
int64_t sys_sync_file_range(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);
	int rc;

	if (host < 0)
		return host;
	lx_wait_begin(c);
	rc = (int)host_ret(sync_file_range(host, (off64_t)c->a[1], (off64_t)c->a[2],
					   (unsigned)c->a[3]));
	lx_wait_end(c);
	return rc;
}

static int64_t lx_dup_at_least(struct lx_call *c, int oldfd, int host, int min_fd, bool cloexec)
{
	int nh = fcntl(host, F_DUPFD_CLOEXEC, 3);
	int fd;

	if (nh < 0)
		return -errno;
	fd = lx_install(c, nh, min_fd, cloexec);
	if (fd >= 0)
		lx_fd_copy_origin(c->p, oldfd, fd);
	return fd;
}

static int64_t lx_fcntl_lock(struct lx_call *c, int host, int cmd)
{
	struct flock fl;
	int rc;

	if (lx_copy_in(c, &fl, c->a[2], sizeof(fl)))
		return -EFAULT;
	lx_wait_begin(c);
	do
		rc = (int)host_ret(fcntl(host, cmd, &fl));
	while (rc == -EINTR && !(rc = lx_sig_eintr(c, LX_ERESTARTSYS)));
	lx_wait_end(c);
	/* The GETLK forms answer in the same structure. */
	if (!rc && (cmd == F_GETLK || cmd == F_OFD_GETLK) &&
	    lx_copy_out(c, c->a[2], &fl, sizeof(fl)))
		return -EFAULT;
	return rc;
}

int64_t sys_fcntl(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);
	int cmd = (int)c->a[1], fd = (int)c->a[0];
	int64_t rc;

	if (host < 0)
		return host;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		if (c->a[2] > INT_MAX)
			return -EINVAL;
		return lx_dup_at_least(c, fd, host, (int)c->a[2], cmd == F_DUPFD_CLOEXEC);
	case F_GETFD:
	case F_SETFD:
		rc = lx_fd_cloexec(c->p, fd, cmd == F_GETFD ? -1 : !!(c->a[2] & FD_CLOEXEC));
		if (rc < 0)
			return rc;
		return cmd == F_GETFD && rc ? FD_CLOEXEC : 0;
	case F_GETFL:
	case F_GETPIPE_SZ:
	case F_GET_SEALS:
		return host_ret(fcntl(host, cmd));
	case F_SETFL:
	case F_SETPIPE_SZ:
	case F_ADD_SEALS: /* a memfd's (shm.c): the host's own seals, checked by the host */
		return host_ret(fcntl(host, cmd, (int)c->a[2]));
	case F_GETLK:
	case F_SETLK:
	case F_SETLKW:
	case F_OFD_GETLK:
	case F_OFD_SETLK:
	case F_OFD_SETLKW:
		return lx_fcntl_lock(c, host, cmd);
	case F_SETOWN:
	case F_GETOWN:
		/* SIGIO's owner: accepted and forgotten, for no SIGIO is delivered (its host
		 * owner would be ccvm, the pid a guest's); nginx's master asks, and never
		 * needs the signal. */
		return 0;
	default:
		return -EINVAL;
	}
}

int64_t sys_dup(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);

	return host < 0 ? host : lx_dup_at_least(c, (int)c->a[0], host, 0, false);
}

static int64_t lx_dup3(struct lx_call *c, uint64_t oldfd, uint64_t newfd, bool cloexec)
{
	int host = lx_host_fd(c, oldfd);
	int nh, rc;

	if (host < 0)
		return host;
	if (newfd > INT_MAX)
		return -EBADF;
	nh = fcntl(host, F_DUPFD_CLOEXEC, 3);
	if (nh < 0)
		return -errno;
	pthread_mutex_lock(&c->p->lock);
	rc = lx_fd_install_at(c->p, nh, (int)newfd, cloexec);
	pthread_mutex_unlock(&c->p->lock);
	if (rc < 0)
		close(nh);
	else
		lx_fd_copy_origin(c->p, (int)oldfd, rc);
	return rc;
}

int64_t sys_dup2(struct lx_call *c)
{
	if (c->a[0] == c->a[1]) {
		int host = lx_host_fd(c, c->a[0]);

		return host < 0 ? host : (int64_t)c->a[1];
	}
	return lx_dup3(c, c->a[0], c->a[1], false);
}

int64_t sys_dup3(struct lx_call *c)
{
	if (c->a[0] == c->a[1] || (c->a[2] & ~(uint64_t)O_CLOEXEC))
		return -EINVAL;
	return lx_dup3(c, c->a[0], c->a[1], c->a[2] & O_CLOEXEC);
}

static int64_t lx_pipe(struct lx_call *c, uint64_t ufds, uint64_t flags)
{
	int *fds = lx_uptr(c, ufds, 2 * sizeof(int));
	int host[2];

	if (flags & ~(uint64_t)(O_CLOEXEC | O_NONBLOCK | O_DIRECT))
		return -EINVAL;
	if (!fds)
		return -EFAULT;
	if (pipe2(host, (int)flags | O_CLOEXEC) < 0)
		return -errno;
	return lx_install_pair(c, host, flags & O_CLOEXEC, fds);
}

int64_t sys_pipe(struct lx_call *c)
{
	return lx_pipe(c, c->a[0], 0);
}

int64_t sys_pipe2(struct lx_call *c)
{
	return lx_pipe(c, c->a[0], c->a[1]);
}

int64_t sys_ioctl(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);
	unsigned long req = (unsigned long)c->a[1];
	uint8_t arg[LX_IOCTL_ARG_MAX];
	size_t size;
	int64_t rc;
	bool get;

	if (host < 0)
		return host;
	switch (req) {
	case TCGETS:
	case TCSETS:
	case TCSETSW:
	case TCSETSF:
		size = LX_TERMIOS_SIZE;
		break;
	case TIOCGWINSZ:
		size = sizeof(struct winsize);
		break;
	case FIONREAD:
	case FIONBIO:
	case TIOCGPGRP:
		size = sizeof(int);
		break;
	case FIOCLEX:
	case FIONCLEX:
		rc = lx_fd_cloexec(c->p, (int)c->a[0], req == FIOCLEX);
		return rc < 0 ? rc : 0;
	case FIOASYNC:
		return 0; /* accepted, but no SIGIO comes (docs/compatibility.md): fcntl's F_SETOWN */
	default:
		return -ENOTTY;
	}
	/* Every request passed through takes a small structure: the set forms (and
	 * FIONBIO) read it, copied in once; the get forms fill it, copied back. */
	get = req == TCGETS || req == TIOCGWINSZ || req == FIONREAD || req == TIOCGPGRP;
	memset(arg, 0, sizeof(arg));
	if (!get && lx_copy_in(c, arg, c->a[2], size))
		return -EFAULT;
	rc = host_ret(ioctl(host, req, arg));
	if (get && rc >= 0 && lx_copy_out(c, c->a[2], arg, size))
		return -EFAULT;
	return rc;
}

int64_t sys_getdents64(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);
	uint64_t len = c->a[2];
	void *buf;
	int rc;

	if (host < 0)
		return host;
	rc = lx_buf(c, c->a[1], &len, &buf);
	if (rc)
		return rc;
	return host_ret(syscall(SYS_getdents64, host, buf, len));
}
