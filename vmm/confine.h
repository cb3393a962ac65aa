/*
 * confine.h - the monitor confined by the kernel: seccomp allow lists per thread role,
 * Landlock on the whole process, and a drop to an unprivileged user or, for root
 * without one, of its capabilities.
 */
#ifndef CCVM_CONFINE_H
#define CCVM_CONFINE_H

#include "../base/role.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CONFINE_ERR_LEN     256
#define CONFINE_NAME_MAX    64
#define CONFINE_EXIT_STATUS (128 + 31) /* what a shell shows for SIGSYS */

/* --confine: auto confines with what the kernel has and warns about the rest;
 * require refuses to run without all of it; off confines nothing. */
enum confine_mode { CONFINE_AUTO = 0, CONFINE_REQUIRE, CONFINE_OFF };

/* "auto", "require" or "off"; -EINVAL for anything else. */
int confine_mode_parse(const char *s, enum confine_mode *mode);

/*
 * NO_NEW_PRIVS, then a seccomp filter on every thread of the process: an allow list of
 * what the monitor's threads call (confine_seccomp.c). Anything else stops the
 * monitor with a line on stderr: execve, ptrace, mount, bpf, io_uring, namespaces,
 * raw and packet sockets, ioctls other than KVM's, userfaultfd's, PAGEMAP_SCAN and
 * the terminal requests the personality passes through... Also compiles each role's
 * own filter and installs the hook that stacks it on every thread role_enter names.
 * Irreversible.
 */
int confine_seccomp(char err[CONFINE_ERR_LEN]);


/* What the guest's file operations may touch: --root read-only, the --rw directories
 * for anything, and the harmless devices under the root for reading and writing. */
struct confine_fs {
	const char *root;
	const char *const *rw;
	int n_rw;
	/* The monitor's own: where images are written (files in them created, written,
	 * read, removed). Unset: none. The control socket and the snapshot log are made
	 * and opened before confinement, and get no rule (vmm/control.c, ctl_prepare). */
	const char *const *snap;
	int n_snap;
};

/*
 * A Landlock domain on the calling thread (and threads it creates later) that holds it
 * to @fs. -EOPNOTSUPP when the kernel has no Landlock; other threads are unaffected.
 */
int confine_landlock(const struct confine_fs *fs, char err[CONFINE_ERR_LEN]);

/* What run and restore confine the monitor to, from the command line alone. */
struct confine_policy {
	enum confine_mode mode;
	struct confine_fs fs;
	const char *user;  /* --user USER[:GROUP], or NULL */
	bool low_ports;    /* a --publish rule binds a host port below 1024 */
};

/*
 * Root without --user (confine_caps.c): lock the securebits, empty the bounding and
 * ambient sets, and keep only CAP_SYS_NICE, CAP_SYS_PTRACE where userfaultfd needs it,
 * and with @low_ports CAP_NET_BIND_SERVICE. Nothing for a monitor not running as root.
 * From the only thread, before seccomp. 0 or -errno with a message in @err.
 */
int confine_caps_drop(bool low_ports, char err[CONFINE_ERR_LEN]);

/* The calling thread's share for role @r once confine_caps_drop ran: a vCPU or timer
 * thread keeps none (but CAP_NET_BIND_SERVICE for low ports). 0 or -errno. */
int confine_caps_role(enum role r);

/*
 * confine_monitor - once the VM is built and before any other thread exists: Landlock
 * on the whole process (@p->fs), the drop to --user (or, for root without it, of its
 * capabilities: confine_caps_drop), then NO_NEW_PRIVS and the seccomp filter
 * (confine_seccomp). What the kernel lacks is a warning on stderr, or,
 * with --confine require, an error. Returns 0 or -errno with a message in @err.
 */
int confine_monitor(const struct confine_policy *p, char err[CONFINE_ERR_LEN]);

/*
 * confine_tool - `ccvm inspect` and `ccvm merge` before they parse an image: Landlock
 * with reading beneath @read_dir (the image's directory, where its parents are) and
 * writing images in @write_dir (NULL: none), then the monitor's seccomp filter. What
 * the kernel lacks is a warning. 0 or -errno with a message in @err.
 */
int confine_tool(const char *read_dir, const char *write_dir, char err[CONFINE_ERR_LEN]);

/* The user --user names. */
struct confine_user {
	uid_t uid;
	gid_t gid;
	char name[CONFINE_NAME_MAX]; /* for initgroups; empty for a bare number */
};

/* Parse "USER[:GROUP]" (names or numbers; USER's primary group by default). */
int confine_user_parse(const char *spec, struct confine_user *u, char err[CONFINE_ERR_LEN]);

/* Become @u for good: supplementary groups, gid, uid (real, effective, saved), and
 * check that root cannot be regained. Process-wide (glibc syncs every thread). */
int confine_drop_user(const struct confine_user *u, char err[CONFINE_ERR_LEN]);

#endif
