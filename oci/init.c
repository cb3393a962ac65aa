/*
 * init.c - the container's process: set up, wait for start, become the monitor.
 *
 * create forks this process and leaves it behind: it is the pid in --pid-file, the
 * process conmon and containerd's shim wait on. It joins the container's cgroup
 * first (so everything after is charged there), then its network namespace (guest
 * sockets are host sockets, made by the monitor), makes its own mount, UTS and IPC
 * namespaces, lays out the mounts, and tells create it is ready. It then blocks on
 * the start FIFO until `start` opens it, and execs `ccvm run`, which builds the VM,
 * runs the program and exits with its status, as runc's init does.
 */
#include "init.h"

#include "cgroup.h"
#include "state.h"
#include "../base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define INIT_ERR_LEN 1024

/* linux.namespaces: the network one joined or made, the rest made. */
static int init_namespaces(const struct oci_config *c, char *err, size_t len)
{
	int flags = CLONE_NEWNS, fd;

	if (c->netns_path) {
		fd = open(c->netns_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET)) {
			int e = errno;

			if (fd >= 0)
				close(fd);
			return log_set_err(-e, err, len, "linux.namespaces (network) %s: %s",
					   c->netns_path, strerror(e));
		}
		close(fd);
	} else if (c->ns_net) {
		flags |= CLONE_NEWNET;
	}
	flags |= (c->ns_uts ? CLONE_NEWUTS : 0) | (c->ns_ipc ? CLONE_NEWIPC : 0) |
		 (c->ns_cgroup ? CLONE_NEWCGROUP : 0);
	if (unshare(flags))
		return log_set_err(-errno, err, len, "linux.namespaces: unshare: %s", strerror(errno));
	if (c->hostname && c->ns_uts && sethostname(c->hostname, strlen(c->hostname)))
		return log_set_err(-errno, err, len, "hostname %s: %s", c->hostname, strerror(errno));
	if (c->domainname && c->ns_uts && setdomainname(c->domainname, strlen(c->domainname)))
		return log_set_err(-errno, err, len, "domainname %s: %s", c->domainname, strerror(errno));
	return 0; /* (a hostname without a UTS namespace was refused with the config) */
}

/* linux.sysctl, in the namespaces just made (config.c let only theirs through). */
static int init_sysctls(const struct oci_config *c, char *err, size_t len)
{
	for (size_t i = 0; i < c->n_sysctls; i++) {
		char path[PATH_MAX];
		int fd, rc = 0;

		snprintf(path, sizeof(path), "/proc/sys/%s", c->sysctls[i].key);
		for (char *p = path + strlen("/proc/sys/"); *p; p++)
			if (*p == '.')
				*p = '/';
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, c->sysctls[i].value, strlen(c->sysctls[i].value)) < 0)
			rc = -errno;
		if (fd >= 0)
			close(fd);
		if (rc)
			return log_set_err(rc, err, len, "linux.sysctl %s: %s", c->sysctls[i].key,
					   strerror(-rc));
	}
	return 0;
}

/* (init.h) */
int oci_terminal(const char *sock, char *err, size_t len)
{
	char name[64], cbuf[CMSG_SPACE(sizeof(int))];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct iovec iov = { .iov_base = name };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int m = -1, s = -1, fd = -1, rc = 0;

	if (!sock)
		return log_set_err(-EINVAL, err, len, "process.terminal: create needs --console-socket");
	if (strlen(sock) >= sizeof(sa.sun_path))
		return log_set_err(-ENAMETOOLONG, err, len, "--console-socket %s: too long", sock);
	strcpy(sa.sun_path, sock);
	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) || unlockpt(m) || ptsname_r(m, name, sizeof(name)) ||
	    (s = open(name, O_RDWR | O_NOCTTY)) < 0) {
		rc = log_set_err(-errno, err, len, "process.terminal: a pseudo-terminal: %s", strerror(errno));
		goto out;
	}
	iov.iov_len = strlen(name);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &m, sizeof(int));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) || sendmsg(fd, &msg, 0) < 0) {
		rc = log_set_err(-errno, err, len, "--console-socket %s: %s", sock, strerror(errno));
		goto out;
	}
	if (ioctl(s, TIOCSCTTY, 0) || dup2(s, 0) < 0 || dup2(s, 1) < 0 || dup2(s, 2) < 0)
		rc = log_set_err(-errno, err, len, "process.terminal: %s", strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	if (m >= 0)
		close(m);
	if (s > 2)
		close(s);
	return rc;
}

/* process.cwd made if the image lacks it (runc does the same) and entered: the
 * personality starts the guest where the monitor is, inside the root. */
static int init_cwd(const struct oci_config *c, const char *root_path, char *err, size_t len)
{
	int root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC), fd, rc = 0;

	if (root < 0)
		return log_set_err(-errno, err, len, "root %s: %s", root_path, strerror(errno));
	fd = oci_make_in_root(root, c->cwd, false);
	close(root);
	if (fd < 0)
		return log_set_err(fd, err, len, "process.cwd %s: %s", c->cwd, strerror(-fd));
	if (fchdir(fd))
		rc = log_set_err(-errno, err, len, "process.cwd %s: %s", c->cwd, strerror(errno));
	close(fd);
	return rc;
}

/* restore: the image opened now and held open across the exec (ccvm restore reads it
 * as /proc/self/fd/N), so that it is this file that is restored even when the caller
 * removes its checkpoint as soon as restore returns, as podman does. */
static int init_hold_image(const char *image, char *held, size_t n, char *err, size_t len)
{
	int fd = open(image, O_RDONLY | O_NOFOLLOW);

	if (fd < 0)
		return log_set_err(-errno, err, len, "restore: %s: %s", image, strerror(errno));
	snprintf(held, n, "/proc/self/fd/%d", fd);
	return 0;
}

/* Block until `start` opens the FIFO, then tell it the process goes on. */
static int init_wait_start(const char *dir)
{
	char fifo[PATH_MAX + 16];
	int fd;

	snprintf(fifo, sizeof(fifo), "%s/%s", dir, OCI_FIFO_FILE);
	do {
		fd = open(fifo, O_WRONLY | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	if (write(fd, "0", 1) != 1) {
		close(fd);
		return -EPIPE;
	}
	close(fd);
	return 0;
}

/* Everything before the start FIFO; @argv the command line to become. */
static int init_setup(const struct oci_init *in, char ***argv, char *err, size_t len)
{
	const struct oci_config *c = in->c;
	char oom[16], held[32];
	struct oci_rw rw = { 0 };
	int rc;

	if (setsid() < 0)
		return log_set_err(-errno, err, len, "setsid: %s", strerror(errno));
	if ((rc = oci_cgroup_join(c, in->systemd_cgroup, err, len)))
		return rc;
	if (c->oom_set) {
		int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

		snprintf(oom, sizeof(oom), "%d", c->oom_score_adj);
		rc = fd < 0 || write(fd, oom, strlen(oom)) < 0 ? -errno : 0;
		if (fd >= 0)
			close(fd);
		if (rc)
			return log_set_err(rc, err, len, "process.oomScoreAdj %s: %s", oom, strerror(-rc));
	}
	if ((rc = init_namespaces(c, err, len)) || (rc = init_sysctls(c, err, len)) ||
	    (rc = oci_mounts_setup(c, in->oci_root, &rw, err, len)) ||
	    (rc = init_cwd(c, rw.root, err, len)))
		goto out;
	if (c->terminal && (rc = oci_terminal(in->console_socket, err, len)))
		goto out;
	if (c->umask_set)
		umask(c->umask);
	if (in->image && (rc = init_hold_image(in->image, held, sizeof(held), err, len)))
		goto out;
	rc = oci_run_argv(c, &rw, in->state_dir, in->image ? held : NULL, in->debug, argv, err, len);
out:
	oci_rw_free(&rw);
	return rc;
}

int oci_init_run(const struct oci_init *in)
{
	char err[INIT_ERR_LEN] = "";
	char **argv = NULL;
	int rc = init_setup(in, &argv, err, sizeof(err));

	if (rc) {
		if (write(in->ready_fd, err, strlen(err)) < 0)
			log_err("%s", err);
		return 1;
	}
	close(in->ready_fd); /* create: set up, write the pid file, return */
	rc = in->image ? 0 : init_wait_start(in->state_dir);
	if (rc) {
		log_err("container %s: the start FIFO: %s", in->c->args[0], strerror(-rc));
		oci_argv_free(argv);
		return 1;
	}
	execve("/proc/self/exe", argv, in->c->env);
	log_err("exec of ccvm run for %s: %s", in->c->args[0], strerror(errno));
	oci_argv_free(argv);
	return 127;
}
