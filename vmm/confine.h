/*
 * confine.h - the monitor confined by the kernel: a seccomp filter, Landlock on the
 * threads that do the guest's file operations, and a drop to an unprivileged user.
 */
#ifndef CCVM_CONFINE_H
#define CCVM_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CONFINE_ERR_LEN     256
#define CONFINE_NAME_MAX    64
#define CONFINE_EXIT_STATUS (128 + 31) /* what a shell shows for SIGSYS */

/*
 * NO_NEW_PRIVS, then a seccomp filter on every thread of the process that stops the
 * monitor, with a line on stderr, at the first system call it never needs: execve,
 * ptrace, mount, bpf, keyctl, perf_event_open, unshare, setns, namespaces through
 * clone, raw and packet sockets, ioctls other than KVM's, userfaultfd's, PAGEMAP_SCAN
 * and the tty and FIO requests the personality passes through. Irreversible.
 */
int confine_seccomp(char err[CONFINE_ERR_LEN]);

/* What the guest's file operations may touch: --root read-only, the --rw directories
 * for anything, and the harmless devices under the root for reading and writing. */
struct confine_fs {
	const char *root;
	const char *const *rw;
	int n_rw;
};

/*
 * A Landlock domain on the calling thread (and threads it creates later) that holds it
 * to @fs. -EOPNOTSUPP when the kernel has no Landlock; other threads are unaffected.
 */
int confine_landlock(const struct confine_fs *fs, char err[CONFINE_ERR_LEN]);

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
