/*
 * path.c - file-system confinement of the guest.
 *
 * The guest's "/" is the --root directory; it may write only under the --rw
 * directories. Every path the guest names is resolved by the host kernel with
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from a descriptor of the root, so
 * "..", absolute symlinks and /proc/self/fd tricks cannot leave it. Whether a place is
 * writable is decided on what the kernel actually opened (its canonical path), not on
 * the guest's spelling. Devices are refused except the harmless ones every program
 * expects (/dev/null, /dev/zero, /dev/urandom, terminals), and the per-process parts
 * of /proc are refused because they would show the monitor itself (its memory, its
 * descriptors) rather than the guest.
 */
#include "path.h"
#include "call.h"
#include "fastio.h"
#include "fdtable.h"
#include "../../guest/fastio/fastio_abi.h"
#include "../../base/log.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define RESOLVE_GUEST (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)

static int fs_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode,
		      uint64_t resolve)
{
	struct open_how how = { .flags = flags | O_CLOEXEC, .mode = mode, .resolve = resolve };
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static int fs_host_path(int host_fd, char out[PATH_MAX])
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", host_fd);
	n = readlink(link, out, PATH_MAX - 1);
	if (n < 0)
		return -errno;
	out[n] = '\0';
	return 0;
}

static bool fs_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Character devices a program may use wherever they are: null, zero, full, random,
 * urandom, the controlling tty and pseudo-terminals. */
static bool fs_harmless_chardev(dev_t rdev)
{
	unsigned ma = major(rdev), mi = minor(rdev);

	if (ma == 1)
		return mi == 3 || mi == 5 || mi == 7 || mi == 8 || mi == 9;
	return (ma == 5 && mi == 0) || ma == 136;
}

/* /proc files that describe the machine, not a process. */
static bool fs_proc_allowed(const char *host_path)
{
	static const char *const ok[] = { "/proc", "/proc/sys", "/proc/meminfo", "/proc/cpuinfo",
					  "/proc/stat", "/proc/loadavg", "/proc/uptime",
					  "/proc/version", "/proc/filesystems" };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strcmp(host_path, ok[i]) == 0)
			return true;
	return fs_under(host_path, "/proc/sys");
}

/* Refuse what the guest must not open at all, whatever the mode. */
static int fs_check_allowed(int host_fd)
{
	char host_path[PATH_MAX];
	struct statfs sfs;
	struct stat st;

	if (fstat(host_fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode))
		return -EACCES;
	if (S_ISCHR(st.st_mode) && !fs_harmless_chardev(st.st_rdev))
		return -EACCES;
	if (fstatfs(host_fd, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC) {
		if (fs_host_path(host_fd, host_path) || !fs_proc_allowed(host_path))
			return -EACCES;
	}
	return 0;
}

bool lx_fs_in_rw(struct lx_fs *fs, int host_fd)
{
	char host_path[PATH_MAX];

	if (fs_host_path(host_fd, host_path))
		return false;
	for (int i = 0; i < fs->n_rw; i++)
		if (fs_under(host_path, fs->rw_real[i]))
			return true;
	return false;
}

bool lx_fs_is_one_of(int host_fd, const char *const *paths, int n)
{
	char host_path[PATH_MAX];

	if (!n || fs_host_path(host_fd, host_path))
		return false;
	for (int i = 0; i < n; i++)
		if (strcmp(host_path, paths[i]) == 0)
			return true;
	return false;
}

bool lx_fs_writable(struct lx_fs *fs, int host_fd)
{
	struct stat st;

	if (fstat(host_fd, &st) == 0 && S_ISCHR(st.st_mode) && fs_harmless_chardev(st.st_rdev))
		return true;
	return lx_fs_in_rw(fs, host_fd);
}

int lx_fs_guest_path(struct lx_fs *fs, int host_fd, char out[PATH_MAX])
{
	char host_path[PATH_MAX];
	size_t n = strlen(fs->root_real);
	int rc = fs_host_path(host_fd, host_path);

	if (rc)
		return rc;
	if (strcmp(fs->root_real, "/") == 0) {
		memcpy(out, host_path, strlen(host_path) + 1);
		return 0;
	}
	if (!fs_under(host_path, fs->root_real))
		return -ENOENT;
	snprintf(out, PATH_MAX, "%s", host_path[n] ? host_path + n : "/");
	return 0;
}

int lx_fs_init(struct lx_fs *fs, const char *root, const char *const *rw, int n_rw)
{
	char cwd[PATH_MAX];
	mode_t old;
	int rc;

	memset(fs, 0, sizeof(*fs));
	fs->root_fd = -1;
	pthread_mutex_init(&fs->lock, NULL);
	fs->lock_ready = true;
	if (!realpath(root, fs->root_real)) {
		rc = -errno;
		log_err("--root %s: %s", root, strerror(errno));
		return rc;
	}
	fs->root_fd = open(fs->root_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fs->root_fd < 0) {
		rc = -errno;
		log_err("--root %s: %s (it must be a directory)", root, strerror(errno));
		return rc;
	}
	fs->rw_real = calloc((size_t)n_rw + 1, sizeof(char *));
	if (!fs->rw_real)
		return -ENOMEM;
	for (int i = 0; i < n_rw; i++) {
		fs->rw_real[i] = realpath(rw[i], NULL);
		if (!fs->rw_real[i]) {
			rc = -errno;
			log_err("--rw %s: %s", rw[i], strerror(errno));
			return rc;
		}
		fs->n_rw++;
	}
	strcpy(fs->cwd, "/");
	if (getcwd(cwd, sizeof(cwd)) && fs_under(cwd, fs->root_real)) {
		size_t n = strcmp(fs->root_real, "/") == 0 ? 0 : strlen(fs->root_real);

		snprintf(fs->cwd, sizeof(fs->cwd), "%s", cwd[n] ? cwd + n : "/");
	}
	/* The monitor creates files for the guest with the guest's umask applied by
	 * hand, so its own must not interfere. */
	old = umask(0);
	fs->umask = old;
	return 0;
}

void lx_fs_fini(struct lx_fs *fs)
{
	if (fs->root_fd >= 0)
		close(fs->root_fd);
	for (int i = 0; i < fs->n_rw; i++)
		free(fs->rw_real[i]);
	free(fs->rw_real);
	fs->rw_real = NULL;
	fs->n_rw = 0;
	fs->root_fd = -1;
	if (fs->lock_ready)
		pthread_mutex_destroy(&fs->lock);
	fs->lock_ready = false;
}

void lx_fs_cwd(struct lx_fs *fs, char out[PATH_MAX])
{
	pthread_mutex_lock(&fs->lock);
	memcpy(out, fs->cwd, strlen(fs->cwd) + 1);
	pthread_mutex_unlock(&fs->lock);
}

int lx_fs_set_cwd(struct lx_fs *fs, const char *gpath)
{
	size_t n = strlen(gpath) + 1;

	if (n > sizeof(fs->cwd))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&fs->lock);
	memcpy(fs->cwd, gpath, n);
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

mode_t lx_fs_umask(struct lx_fs *fs)
{
	mode_t m;

	pthread_mutex_lock(&fs->lock);
	m = fs->umask;
	pthread_mutex_unlock(&fs->lock);
	return m;
}

mode_t lx_fs_set_umask(struct lx_fs *fs, mode_t m)
{
	mode_t old;

	pthread_mutex_lock(&fs->lock);
	old = fs->umask;
	fs->umask = m & 0777;
	pthread_mutex_unlock(&fs->lock);
	return old;
}

int lx_path_join(struct lx_proc *p, int dirfd, const char *path, char out[PATH_MAX])
{
	char base[PATH_MAX];
	const char *b = base;
	int n;

	if (!path[0])
		return -ENOENT;
	if (path[0] == '/') {
		if (strlen(path) >= PATH_MAX)
			return -ENAMETOOLONG;
		strcpy(out, path);
		return 0;
	}
	if (dirfd != AT_FDCWD) {
		int host = lx_fd_host(p, dirfd);
		struct stat st;
		int rc;

		if (host < 0)
			return host;
		if (fstat(host, &st) < 0)
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		rc = lx_fs_guest_path(&p->fs, host, base);
		if (rc)
			return rc;
	} else {
		lx_fs_cwd(&p->fs, base);
	}
	n = snprintf(out, PATH_MAX, "%s%s%s", b, b[strlen(b) - 1] == '/' ? "" : "/", path);
	return n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

int lx_fs_open_path(struct lx_fs *fs, const char *gpath, bool follow, int *host_fd)
{
	int fd = fs_openat2(fs->root_fd, gpath, O_PATH | (follow ? 0 : O_NOFOLLOW), 0,
			    RESOLVE_GUEST);

	if (fd < 0)
		return fd;
	*host_fd = fd;
	return 0;
}

int lx_fs_parent(struct lx_fs *fs, const char *gpath, bool for_write, int *parent_fd,
		 char base[NAME_MAX + 1])
{
	char dir[PATH_MAX];
	size_t len = strlen(gpath);
	const char *slash;
	int fd, rc;

	while (len > 1 && gpath[len - 1] == '/')
		len--;
	memcpy(dir, gpath, len);
	dir[len] = '\0';
	slash = strrchr(dir, '/');
	if (!slash)
		return -ENOENT; /* callers always pass absolute guest paths */
	if (strlen(slash + 1) > NAME_MAX)
		return -ENAMETOOLONG;
	strcpy(base, slash + 1);
	if (!base[0])
		return -EBUSY; /* the root itself */
	dir[slash == dir ? 1 : (size_t)(slash - dir)] = '\0';
	fd = fs_openat2(fs->root_fd, dir, O_PATH | O_DIRECTORY, 0, RESOLVE_GUEST);
	if (fd < 0)
		return fd;
	rc = fs_check_allowed(fd);
	if (!rc && for_write && !lx_fs_writable(fs, fd))
		rc = -EROFS;
	if (rc) {
		close(fd);
		return rc;
	}
	*parent_fd = fd;
	return 0;
}

/*
 * Open for real what the O_PATH descriptor @path_fd names, with the guest's @flags,
 * once everything was checked on @path_fd itself. Never a controlling terminal. A
 * FIFO opened blocking waits for its peer inside the blocking bracket of call @c, so
 * that a pause of the VM does not wait for it; without a call (a restore) it opens
 * non-blocking and becomes blocking afterwards, so a restore never waits for a peer.
 */
static int fs_reopen(struct lx_call *c, int path_fd, int flags)
{
	bool wait = false, unblock = false;
	struct stat st;
	char link[64];
	int fd, err;

	if (!(flags & O_NONBLOCK) && fstat(path_fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
		wait = c != NULL;
		unblock = c == NULL;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", path_fd);
	if (wait)
		lx_wait_begin(c);
	fd = open(link, (flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC | O_NOCTTY |
				(unblock ? O_NONBLOCK : 0));
	err = errno;
	if (wait)
		lx_wait_end(c);
	if (fd < 0)
		return -err;
	if (unblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* The O_PATH descriptor of what (@gpath, @flags) names, checked: a device or a /proc
 * entry the guest may not open is refused before anything opens it for real. */
static int fs_lookup_checked(struct lx_fs *fs, const char *gpath, int flags)
{
	struct stat st;
	int fd, rc;

	fd = fs_openat2(fs->root_fd, gpath, O_PATH | (flags & (O_NOFOLLOW | O_DIRECTORY)), 0,
			RESOLVE_GUEST);
	if (fd < 0)
		return fd;
	rc = fs_check_allowed(fd);
	/* O_NOFOLLOW on a final symlink is ELOOP, except for O_PATH itself. */
	if (!rc && (flags & O_NOFOLLOW) && !(flags & O_PATH) && fstat(fd, &st) == 0 &&
	    S_ISLNK(st.st_mode))
		rc = -ELOOP;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

static int fs_open_for_write(struct lx_call *c, struct lx_fs *fs, const char *gpath, int flags,
			     mode_t mode)
{
	char base[NAME_MAX + 1];
	int fd, pfd, rc;

	fd = fs_lookup_checked(fs, gpath, flags);
	if (fd >= 0) {
		if ((flags & O_CREAT) && (flags & O_EXCL))
			rc = -EEXIST;
		else
			rc = lx_fs_writable(fs, fd) ? fs_reopen(c, fd, flags) : -EROFS;
		close(fd);
		return rc;
	}
	if (fd != -ENOENT || !(flags & O_CREAT))
		return fd;
	rc = lx_fs_parent(fs, gpath, true, &pfd, base);
	if (rc)
		return rc;
	/* The name does not exist (or is a dangling symlink, which we refuse to follow
	 * out of the writable tree): create it right there. */
	fd = fs_openat2(pfd, base, (uint64_t)flags | O_NOCTTY, mode & ~lx_fs_umask(fs) & 07777,
			RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	close(pfd);
	return fd;
}

int lx_fs_open(struct lx_call *c, struct lx_fs *fs, const char *gpath, int flags, mode_t mode,
	       int *host_fd)
{
	bool wr = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC));
	int fd, pfd;

	/* The exitless socket library is the monitor's, whatever the guest's root holds. */
	if (strcmp(gpath, FASTIO_PATH) == 0)
		return wr ? -EROFS : lx_fastio_open_lib(host_fd);
	flags &= ~O_CLOEXEC; /* the monitor's descriptors are always close-on-exec */
	if (wr) {
		fd = fs_open_for_write(c, fs, gpath, flags, mode);
	} else {
		/* Look, decide, then open: nothing is opened for real before the checks. */
		pfd = fs_lookup_checked(fs, gpath, flags);
		if (pfd < 0 || (flags & O_PATH))
			fd = pfd;
		else {
			fd = fs_reopen(c, pfd, flags);
			close(pfd);
		}
	}
	if (fd < 0)
		return fd;
	*host_fd = fd;
	return 0;
}

int lx_fs_copy(struct lx_fs *dst, struct lx_fs *src)
{
	memset(dst, 0, sizeof(*dst));
	pthread_mutex_init(&dst->lock, NULL);
	dst->lock_ready = true;
	memcpy(dst->root_real, src->root_real, sizeof(dst->root_real));
	pthread_mutex_lock(&src->lock);
	memcpy(dst->cwd, src->cwd, sizeof(dst->cwd));
	dst->umask = src->umask;
	pthread_mutex_unlock(&src->lock);
	dst->root_fd = fcntl(src->root_fd, F_DUPFD_CLOEXEC, 3);
	if (dst->root_fd < 0)
		return -errno;
	dst->rw_real = calloc((size_t)src->n_rw + 1, sizeof(char *));
	if (!dst->rw_real)
		return -ENOMEM;
	for (int i = 0; i < src->n_rw; i++) {
		dst->rw_real[i] = strdup(src->rw_real[i]);
		if (!dst->rw_real[i])
			return -ENOMEM;
		dst->n_rw++;
	}
	return 0;
}
