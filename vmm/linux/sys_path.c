/*
 * sys_path.c - the file system calls that name a path: open, stat, access, readlink,
 * the working directory, mkdir, unlink, rename, links, chmod and the umask.
 *
 * Each reads its path argument once into monitor memory (lx_upath), joins it to the
 * guest's directory fd or working directory, and hands it to path.c, which keeps it
 * inside the guest's root and writable only under its --rw directories. The calls on
 * descriptors alone (read, write, dup, fcntl, ioctl...) are sys_file.c's.
 */
#include "sys.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LX_AT_FDCWD      -100
#define LX_STATX_SIZE    256
#define LX_OPEN_FLAGS                                                                         \
	(O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC | \
	 O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_SYNC |  \
	 O_PATH | O_TMPFILE)

/* The absolute guest path named by @dirfd and @path (already in monitor memory). */
static int lx_join(struct lx_call *c, int dirfd, const char *path, char gpath[PATH_MAX])
{
	int rc;

	pthread_mutex_lock(&c->p->lock);
	rc = lx_path_join(c->p, dirfd, path, gpath);
	pthread_mutex_unlock(&c->p->lock);
	return rc;
}

/* The absolute guest path named by @dirfd and the string at guest address @upath. */
static int lx_guest_path(struct lx_call *c, int dirfd, uint64_t upath, char gpath[PATH_MAX])
{
	char path[PATH_MAX];
	int rc = lx_upath(c, upath, path);

	return rc ? rc : lx_join(c, dirfd, path, gpath);
}

static int64_t lx_openat(struct lx_call *c, int dirfd, uint64_t upath, uint64_t flags,
			 uint64_t mode)
{
	char gpath[PATH_MAX];
	int rc, host;

	rc = lx_guest_path(c, dirfd, upath, gpath);
	if (rc)
		return rc;
	rc = lx_fs_open(c, &c->p->fs, gpath, (int)(flags & LX_OPEN_FLAGS), (mode_t)mode, &host);
	if (rc)
		return rc;
	rc = lx_install(c, host, 0, flags & O_CLOEXEC);
	if (rc >= 0) {
		pthread_mutex_lock(&c->p->lock);
		lx_fd_set_origin(c->p, rc, gpath, (int)(flags & LX_OPEN_FLAGS), -1);
		pthread_mutex_unlock(&c->p->lock);
	}
	return rc;
}

int64_t sys_open(struct lx_call *c)
{
	return lx_openat(c, LX_AT_FDCWD, c->a[0], c->a[1], c->a[2]);
}

int64_t sys_openat(struct lx_call *c)
{
	return lx_openat(c, (int)c->a[0], c->a[1], c->a[2], c->a[3]);
}

/* Open an O_PATH descriptor for (dirfd, path): what the *stat and access calls
 * inspect. An empty path with AT_EMPTY_PATH means dirfd itself. */
static int lx_lookup(struct lx_call *c, int dirfd, uint64_t upath, uint64_t flags, int *host)
{
	char path[PATH_MAX], gpath[PATH_MAX];
	int rc;

	rc = lx_upath(c, upath, path);
	if (rc)
		return rc;
	if (path[0] || !(flags & AT_EMPTY_PATH)) {
		rc = lx_join(c, dirfd, path, gpath);
		if (rc)
			return rc;
		return lx_fs_open_path(&c->p->fs, gpath, !(flags & AT_SYMLINK_NOFOLLOW), host);
	}
	if (dirfd == LX_AT_FDCWD) {
		lx_fs_cwd(&c->p->fs, gpath);
		return lx_fs_open_path(&c->p->fs, gpath, true, host);
	}
	rc = lx_host_fd(c, (uint64_t)(unsigned)dirfd);
	if (rc < 0)
		return rc;
	*host = fcntl(rc, F_DUPFD_CLOEXEC, 0);
	return *host < 0 ? -errno : 0;
}

static int64_t lx_stat(struct lx_call *c, int dirfd, uint64_t upath, uint64_t ubuf,
		       uint64_t flags)
{
	struct stat *st = lx_uptr(c, ubuf, sizeof(struct stat));
	int host, rc;

	if (!st)
		return -EFAULT;
	rc = lx_lookup(c, dirfd, upath, flags, &host);
	if (rc)
		return rc;
	rc = fstat(host, st) < 0 ? -errno : 0;
	close(host);
	return rc;
}

int64_t sys_stat(struct lx_call *c)
{
	return lx_stat(c, LX_AT_FDCWD, c->a[0], c->a[1], 0);
}

int64_t sys_lstat(struct lx_call *c)
{
	return lx_stat(c, LX_AT_FDCWD, c->a[0], c->a[1], AT_SYMLINK_NOFOLLOW);
}

int64_t sys_newfstatat(struct lx_call *c)
{
	return lx_stat(c, (int)c->a[0], c->a[1], c->a[2], c->a[3]);
}

/* statfs/fstatfs: the host's answer for the file system the guest path lands on. */
int64_t sys_statfs(struct lx_call *c)
{
	struct statfs *st = lx_uptr(c, c->a[1], sizeof(struct statfs));
	int host, rc;

	if (!st)
		return -EFAULT;
	rc = lx_lookup(c, LX_AT_FDCWD, c->a[0], 0, &host);
	if (rc)
		return rc;
	rc = fstatfs(host, st) < 0 ? -errno : 0;
	close(host);
	return rc;
}

int64_t sys_statx(struct lx_call *c)
{
	void *buf = lx_uptr(c, c->a[4], LX_STATX_SIZE);
	int host, rc;

	if (!buf)
		return -EFAULT;
	rc = lx_lookup(c, (int)c->a[0], c->a[1], c->a[2], &host);
	if (rc)
		return rc;
	rc = (int)host_ret(syscall(SYS_statx, host, "",
				   AT_EMPTY_PATH | (c->a[2] & AT_STATX_SYNC_TYPE),
				   (unsigned)c->a[3], buf));
	close(host);
	return rc;
}

static int64_t lx_access(struct lx_call *c, int dirfd, uint64_t upath, uint64_t mode,
			 uint64_t flags)
{
	int host, rc;

	if (mode & ~(uint64_t)(R_OK | W_OK | X_OK))
		return -EINVAL;
	rc = lx_lookup(c, dirfd, upath, flags, &host);
	if (rc)
		return rc;
	rc = (int)host_ret(syscall(SYS_faccessat2, host, "", (int)mode,
				   AT_EMPTY_PATH | (flags & AT_EACCESS)));
	if (!rc && (mode & W_OK) && !lx_fs_writable(&c->p->fs, host))
		rc = -EROFS;
	close(host);
	return rc;
}

int64_t sys_access(struct lx_call *c)
{
	return lx_access(c, LX_AT_FDCWD, c->a[0], c->a[1], 0);
}

int64_t sys_faccessat(struct lx_call *c)
{
	return lx_access(c, (int)c->a[0], c->a[1], c->a[2], 0);
}

int64_t sys_faccessat2(struct lx_call *c)
{
	return lx_access(c, (int)c->a[0], c->a[1], c->a[2], c->a[3]);
}

/* Resolve (dirfd, path) to the parent directory and final name, for calls that act
 * on a name (mkdir, unlink, rename, readlink). */
static int lx_parent(struct lx_call *c, int dirfd, uint64_t upath, bool for_write, int *pfd,
		     char base[NAME_MAX + 1], char gpath[PATH_MAX])
{
	int rc = lx_guest_path(c, dirfd, upath, gpath);

	if (rc)
		return rc;
	return lx_fs_parent(&c->p->fs, gpath, for_write, pfd, base);
}

static bool lx_is_self_exe(struct lx_call *c, const char *gpath)
{
	char mine[64];

	snprintf(mine, sizeof(mine), "/proc/%d/exe", c->p->pid);
	return strcmp(gpath, "/proc/self/exe") == 0 || strcmp(gpath, "/proc/thread-self/exe") == 0 ||
	       strcmp(gpath, mine) == 0;
}

static int64_t lx_readlink(struct lx_call *c, int dirfd, uint64_t upath, uint64_t ubuf,
			   uint64_t size)
{
	char base[NAME_MAX + 1], gpath[PATH_MAX];
	void *buf;
	int pfd, rc;
	long n;

	if ((int64_t)size <= 0)
		return -EINVAL;
	if (size > PATH_MAX)
		size = PATH_MAX;
	buf = lx_uptr(c, ubuf, size);
	if (!buf)
		return -EFAULT;
	rc = lx_guest_path(c, dirfd, upath, gpath);
	if (rc)
		return rc;
	/* The monitor's own /proc entry is off limits; the guest's executable is its
	 * own program, not ccvm. */
	if (lx_is_self_exe(c, gpath)) {
		n = (long)strlen(c->p->exe);
		if ((uint64_t)n > size)
			n = (long)size;
		memcpy(buf, c->p->exe, (size_t)n);
		return n;
	}
	rc = lx_fs_parent(&c->p->fs, gpath, false, &pfd, base);
	if (rc)
		return rc;
	n = readlinkat(pfd, base, buf, size);
	rc = n < 0 ? -errno : 0;
	close(pfd);
	return rc ? rc : n;
}

int64_t sys_readlink(struct lx_call *c)
{
	return lx_readlink(c, LX_AT_FDCWD, c->a[0], c->a[1], c->a[2]);
}

int64_t sys_readlinkat(struct lx_call *c)
{
	return lx_readlink(c, (int)c->a[0], c->a[1], c->a[2], c->a[3]);
}

int64_t sys_getcwd(struct lx_call *c)
{
	char cwd[PATH_MAX];
	size_t len;

	lx_fs_cwd(&c->p->fs, cwd);
	len = strlen(cwd) + 1;
	if (c->a[1] < len)
		return -ERANGE;
	return lx_copy_out(c, c->a[0], cwd, len) ? -EFAULT : (int64_t)len;
}

static int lx_set_cwd(struct lx_call *c, int host)
{
	char gpath[PATH_MAX];
	struct stat st;
	int rc;

	if (fstat(host, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (syscall(SYS_faccessat2, host, "", X_OK, AT_EMPTY_PATH) < 0)
		return -errno;
	rc = lx_fs_guest_path(&c->p->fs, host, gpath);
	return rc ? rc : lx_fs_set_cwd(&c->p->fs, gpath);
}

int64_t sys_chdir(struct lx_call *c)
{
	int host, rc;

	rc = lx_lookup(c, LX_AT_FDCWD, c->a[0], 0, &host);
	if (rc)
		return rc;
	rc = lx_set_cwd(c, host);
	close(host);
	return rc;
}

int64_t sys_fchdir(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);

	return host < 0 ? host : lx_set_cwd(c, host);
}

static int64_t lx_mkdir(struct lx_call *c, int dirfd, uint64_t upath, uint64_t mode)
{
	char base[NAME_MAX + 1], gpath[PATH_MAX];
	int pfd, rc;

	rc = lx_parent(c, dirfd, upath, true, &pfd, base, gpath);
	if (rc)
		return rc;
	rc = (int)host_ret(mkdirat(pfd, base, (mode_t)(mode & 07777 & ~lx_fs_umask(&c->p->fs))));
	close(pfd);
	return rc;
}

int64_t sys_mkdir(struct lx_call *c)
{
	return lx_mkdir(c, LX_AT_FDCWD, c->a[0], c->a[1]);
}

int64_t sys_mkdirat(struct lx_call *c)
{
	return lx_mkdir(c, (int)c->a[0], c->a[1], c->a[2]);
}

static int64_t lx_unlink(struct lx_call *c, int dirfd, uint64_t upath, uint64_t flags)
{
	char base[NAME_MAX + 1], gpath[PATH_MAX];
	int pfd, rc;

	if (flags & ~(uint64_t)AT_REMOVEDIR)
		return -EINVAL;
	rc = lx_parent(c, dirfd, upath, true, &pfd, base, gpath);
	if (rc)
		return rc;
	rc = (int)host_ret(unlinkat(pfd, base, (int)flags));
	close(pfd);
	return rc;
}

int64_t sys_unlink(struct lx_call *c)
{
	return lx_unlink(c, LX_AT_FDCWD, c->a[0], 0);
}

int64_t sys_unlinkat(struct lx_call *c)
{
	return lx_unlink(c, (int)c->a[0], c->a[1], c->a[2]);
}

int64_t sys_rmdir(struct lx_call *c)
{
	return lx_unlink(c, LX_AT_FDCWD, c->a[0], AT_REMOVEDIR);
}

/* Both parents of a two-name call (rename, link), both writable; on error neither
 * stays open. */
static int lx_two_parents(struct lx_call *c, int olddir, uint64_t oldp, int newdir, uint64_t newp,
			  int *opfd, char obase[NAME_MAX + 1], int *npfd, char nbase[NAME_MAX + 1])
{
	char gpath[PATH_MAX];
	int rc = lx_parent(c, olddir, oldp, true, opfd, obase, gpath);

	if (rc)
		return rc;
	rc = lx_parent(c, newdir, newp, true, npfd, nbase, gpath);
	if (rc)
		close(*opfd);
	return rc;
}

static int64_t lx_rename(struct lx_call *c, int olddir, uint64_t oldp, int newdir, uint64_t newp,
			 uint64_t flags)
{
	char obase[NAME_MAX + 1], nbase[NAME_MAX + 1];
	int opfd, npfd, rc;

	rc = lx_two_parents(c, olddir, oldp, newdir, newp, &opfd, obase, &npfd, nbase);
	if (rc)
		return rc;
	rc = (int)host_ret(syscall(SYS_renameat2, opfd, obase, npfd, nbase, (unsigned)flags));
	close(opfd);
	close(npfd);
	return rc;
}

int64_t sys_rename(struct lx_call *c)
{
	return lx_rename(c, LX_AT_FDCWD, c->a[0], LX_AT_FDCWD, c->a[1], 0);
}

int64_t sys_renameat(struct lx_call *c)
{
	return lx_rename(c, (int)c->a[0], c->a[1], (int)c->a[2], c->a[3], 0);
}

int64_t sys_renameat2(struct lx_call *c)
{
	return lx_rename(c, (int)c->a[0], c->a[1], (int)c->a[2], c->a[3], c->a[4]);
}

int64_t sys_umask(struct lx_call *c)
{
	return lx_fs_set_umask(&c->p->fs, (mode_t)c->a[0]); /* it keeps the 0777 bits */
}

static int64_t lx_symlink(struct lx_call *c, uint64_t utarget, int dirfd, uint64_t upath)
{
	char base[NAME_MAX + 1], gpath[PATH_MAX], target[PATH_MAX];
	int pfd, rc;

	rc = lx_upath(c, utarget, target);
	if (rc)
		return rc;
	rc = lx_parent(c, dirfd, upath, true, &pfd, base, gpath);
	if (rc)
		return rc;
	/* The target is stored as text; whenever the guest follows it, it is resolved
	 * inside the guest's root like any other path. */
	rc = (int)host_ret(symlinkat(target, pfd, base));
	close(pfd);
	return rc;
}

int64_t sys_symlink(struct lx_call *c)
{
	return lx_symlink(c, c->a[0], LX_AT_FDCWD, c->a[1]);
}

int64_t sys_symlinkat(struct lx_call *c)
{
	return lx_symlink(c, c->a[0], (int)c->a[1], c->a[2]);
}

static int64_t lx_link(struct lx_call *c, int olddir, uint64_t oldp, int newdir, uint64_t newp,
		       uint64_t flags)
{
	char obase[NAME_MAX + 1], nbase[NAME_MAX + 1];
	int opfd, npfd, rc;

	if (flags & ~(uint64_t)AT_SYMLINK_FOLLOW)
		return -EINVAL;
	/* The existing name must be writable too: a hard link would otherwise make a
	 * read-only file writable through its new name. */
	rc = lx_two_parents(c, olddir, oldp, newdir, newp, &opfd, obase, &npfd, nbase);
	if (rc)
		return rc;
	rc = (int)host_ret(linkat(opfd, obase, npfd, nbase, 0));
	close(opfd);
	close(npfd);
	return rc;
}

int64_t sys_link(struct lx_call *c)
{
	return lx_link(c, LX_AT_FDCWD, c->a[0], LX_AT_FDCWD, c->a[1], 0);
}

int64_t sys_linkat(struct lx_call *c)
{
	return lx_link(c, (int)c->a[0], c->a[1], (int)c->a[2], c->a[3], c->a[4]);
}

/* A mode change needs the file under an --rw directory: a harmless device such as
 * /dev/null is writable, but its mode is the host's. Changed through the descriptor's
 * /proc/self/fd link, which works for O_PATH descriptors and opens nothing. */
static int64_t lx_chmod_fd(struct lx_call *c, int host, uint64_t mode)
{
	char link[64];

	if (!lx_fs_in_rw(&c->p->fs, host))
		return -EROFS;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", host);
	return host_ret(chmod(link, (mode_t)(mode & 07777)));
}

static int64_t lx_chmod(struct lx_call *c, int dirfd, uint64_t upath, uint64_t mode)
{
	int host, rc;

	rc = lx_lookup(c, dirfd, upath, 0, &host);
	if (rc)
		return rc;
	rc = (int)lx_chmod_fd(c, host, mode);
	close(host);
	return rc;
}

int64_t sys_chmod(struct lx_call *c)
{
	return lx_chmod(c, LX_AT_FDCWD, c->a[0], c->a[1]);
}

int64_t sys_fchmodat(struct lx_call *c)
{
	return lx_chmod(c, (int)c->a[0], c->a[1], c->a[2]);
}

int64_t sys_fchmod(struct lx_call *c)
{
	int host = lx_host_fd(c, c->a[0]);

	return host < 0 ? host : lx_chmod_fd(c, host, c->a[1]);
}
