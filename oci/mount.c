/*
 * mount.c - the container's files, laid out in the monitor's own mount namespace.
 *
 * The guest's paths are resolved by the personality inside its root directory
 * (vmm/linux/path.c), so what a container's config mounts is made for real under that
 * root, in a mount namespace only the monitor lives in, as runc makes it for a
 * container's init. The image is hostile: every target is opened with openat2 and
 * RESOLVE_IN_ROOT, so a symbolic link in it that points at /etc resolves inside the
 * root, and the mount goes onto the descriptor (/proc/self/fd/N), never onto a path
 * looked up again.
 */
#include "mount.h"

#include "../base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *const std_devices[] = { "null", "zero", "full", "random", "urandom", "tty" };

int oci_open_in_root(int root_fd, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	const char *rel = path;
	long fd;

	while (*rel == '/')
		rel++;
	fd = syscall(SYS_openat2, root_fd, *rel ? rel : ".", &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

int oci_make_in_root(int root_fd, const char *path, bool file)
{
	char parent[PATH_MAX], *slash;
	int fd = oci_open_in_root(root_fd, path, O_PATH), pfd, rc;

	if (fd != -ENOENT)
		return fd;
	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (!slash || !slash[1])
		return -ENOENT;
	*slash = '\0';
	pfd = parent[0] ? oci_make_in_root(root_fd, parent, false) : oci_open_in_root(root_fd, "/", O_PATH);
	if (pfd < 0)
		return pfd;
	if (file) {
		int nfd = openat(pfd, slash + 1, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);

		rc = nfd < 0 ? -errno : 0;
		if (nfd >= 0)
			close(nfd);
	} else {
		rc = mkdirat(pfd, slash + 1, 0755) ? -errno : 0;
	}
	close(pfd);
	if (rc && rc != -EEXIST)
		return rc;
	return oci_open_in_root(root_fd, path, O_PATH);
}

static void mnt_fd_path(int fd, char out[64])
{
	snprintf(out, 64, "/proc/self/fd/%d", fd);
}

/* The host path a mounted target now has, kept as a writable directory. */
static int mnt_keep_rw(int fd, struct oci_rw *rw)
{
	char link[64], host[PATH_MAX];
	ssize_t n;

	mnt_fd_path(fd, link);
	n = readlink(link, host, sizeof(host) - 1);
	if (n <= 0)
		return -errno;
	host[n] = '\0';
	if (rw->n >= OCI_MAX_RW)
		return -E2BIG;
	rw->dirs[rw->n] = strdup(host);
	return rw->dirs[rw->n] ? (rw->n++, 0) : -ENOMEM;
}

/* A bind: the target made like the source (file or directory), bound, then remounted
 * with the flags a bind cannot take at once. */
static int mnt_bind(int root_fd, const struct oci_mount *m, struct oci_rw *rw)
{
	unsigned long flags = m->flags | (m->ro ? MS_RDONLY : 0);
	char link[64];
	struct stat st;
	int fd, rc = 0;

	if (stat(m->src, &st))
		return -errno;
	fd = oci_make_in_root(root_fd, m->dest, !S_ISDIR(st.st_mode));
	if (fd < 0)
		return fd;
	mnt_fd_path(fd, link);
	if (mount(m->src, link, NULL, MS_BIND | (m->rec ? MS_REC : 0), NULL))
		rc = -errno;
	close(fd);
	if (rc)
		return rc;
	/* the descriptor named what was under the mount: open the mount itself */
	fd = oci_open_in_root(root_fd, m->dest, O_PATH);
	if (fd < 0)
		return fd;
	mnt_fd_path(fd, link);
	if (flags && mount(NULL, link, NULL, MS_BIND | MS_REMOUNT | flags, NULL))
		rc = -errno;
	if (!rc && !m->ro && S_ISDIR(st.st_mode))
		rc = mnt_keep_rw(fd, rw);
	close(fd);
	return rc;
}

static int mnt_tmpfs(int root_fd, const struct oci_mount *m, struct oci_rw *rw)
{
	char link[64];
	int fd = oci_make_in_root(root_fd, m->dest, false), rc = 0;

	if (fd < 0)
		return fd;
	mnt_fd_path(fd, link);
	if (mount("tmpfs", link, "tmpfs", m->flags | (m->ro ? MS_RDONLY : 0), m->data))
		rc = -errno;
	close(fd);
	if (rc || m->ro)
		return rc;
	fd = oci_open_in_root(root_fd, m->dest, O_PATH);
	if (fd < 0)
		return fd;
	rc = mnt_keep_rw(fd, rw);
	close(fd);
	return rc;
}

/* The six devices every container has, the host's own bound in. A read-only root
 * without /dev/X cannot take it: the guest then has no X, as on a bare image. */
static int mnt_devices(int root_fd)
{
	for (size_t i = 0; i < sizeof(std_devices) / sizeof(std_devices[0]); i++) {
		char dest[32], src[32], link[64];
		int fd, rc = 0;

		snprintf(dest, sizeof(dest), "/dev/%s", std_devices[i]);
		snprintf(src, sizeof(src), "/dev/%s", std_devices[i]);
		fd = oci_make_in_root(root_fd, dest, true);
		if (fd == -EROFS || fd == -EACCES) {
			log_debug("no %s in a read-only root", dest);
			continue;
		}
		if (fd < 0)
			return fd;
		mnt_fd_path(fd, link);
		if (mount(src, link, NULL, MS_BIND, NULL))
			rc = -errno;
		close(fd);
		if (rc)
			return rc;
	}
	return 0;
}

/* maskedPaths: a directory hidden under an empty read-only tmpfs, a file under
 * /dev/null; what the image lacks needs nothing. readonlyPaths: bound read-only onto
 * themselves. */
static int mnt_hide(int root_fd, const char *path, bool mask)
{
	int fd = oci_open_in_root(root_fd, path, O_PATH), rc = 0;
	char link[64];
	struct stat st;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	mnt_fd_path(fd, link);
	if (fstat(fd, &st))
		rc = -errno;
	else if (mask && S_ISDIR(st.st_mode))
		rc = mount("tmpfs", link, "tmpfs", MS_RDONLY, NULL) ? -errno : 0;
	else if (mask)
		rc = mount("/dev/null", link, NULL, MS_BIND, NULL) ? -errno : 0;
	else if (mount(link, link, NULL, MS_BIND | MS_REC, NULL))
		rc = -errno;
	close(fd);
	if (rc || mask)
		return rc;
	fd = oci_open_in_root(root_fd, path, O_PATH);
	if (fd < 0)
		return fd;
	mnt_fd_path(fd, link);
	rc = mount(NULL, link, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) ? -errno : 0;
	close(fd);
	return rc;
}

/* The root itself: private propagation for everything (nothing the container mounts
 * reaches the host), the root bound at the same path for every container, read-only
 * when the config says so. */
static int mnt_root(const struct oci_config *c, const char *oci_root, struct oci_rw *rw)
{
	if (snprintf(rw->root, sizeof(rw->root), "%s/%s", oci_root, OCI_ROOT_MOUNT) >=
	    (int)sizeof(rw->root))
		return -ENAMETOOLONG;
	if (mkdir(rw->root, 0700) && errno != EEXIST)
		return -errno;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -errno;
	if (mount(c->root, rw->root, NULL, MS_BIND | MS_REC, NULL))
		return -errno;
	if (c->readonly)
		return mount(NULL, rw->root, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) ? -errno : 0;
	if (rw->n >= OCI_MAX_RW || !(rw->dirs[rw->n] = strdup(rw->root)))
		return -ENOMEM;
	rw->n++;
	return 0;
}

static int mnt_all(const struct oci_config *c, int root_fd, struct oci_rw *rw, char *err,
		   size_t len)
{
	int rc;

	for (size_t i = 0; i < c->n_mounts; i++) {
		const struct oci_mount *m = &c->mounts[i];

		if (m->kind == OCI_MOUNT_VIRTUAL)
			continue;
		rc = m->kind == OCI_MOUNT_BIND ? mnt_bind(root_fd, m, rw) : mnt_tmpfs(root_fd, m, rw);
		if (rc)
			return log_set_err(rc, err, len, "mounts[%zu] (%s): %s", i, m->dest, strerror(-rc));
	}
	if ((rc = mnt_devices(root_fd)))
		return log_set_err(rc, err, len, "the standard devices in /dev: %s", strerror(-rc));
	for (size_t i = 0; i < c->n_masked; i++)
		if ((rc = mnt_hide(root_fd, c->masked[i], true)))
			return log_set_err(rc, err, len, "linux.maskedPaths %s: %s", c->masked[i],
					   strerror(-rc));
	for (size_t i = 0; i < c->n_ro_paths; i++)
		if ((rc = mnt_hide(root_fd, c->ro_paths[i], false)))
			return log_set_err(rc, err, len, "linux.readonlyPaths %s: %s", c->ro_paths[i],
					   strerror(-rc));
	return 0;
}

int oci_mounts_setup(const struct oci_config *c, const char *oci_root, struct oci_rw *rw,
		     char *err, size_t len)
{
	int root_fd, rc;

	memset(rw, 0, sizeof(*rw));
	if ((rc = mnt_root(c, oci_root, rw)))
		return log_set_err(rc, err, len, "root %s at %s in the container's mount "
				   "namespace: %s", c->root, rw->root, strerror(-rc));
	root_fd = open(rw->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return log_set_err(-errno, err, len, "root %s: %s", c->root, strerror(errno));
	rc = mnt_all(c, root_fd, rw, err, len);
	close(root_fd);
	return rc;
}

void oci_rw_free(struct oci_rw *rw)
{
	for (int i = 0; i < rw->n; i++)
		free(rw->dirs[i]);
	rw->n = 0;
}
