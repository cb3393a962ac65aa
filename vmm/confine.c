/*
 * confine.c - the monitor confined by the kernel.
 *
 * The personality already refuses what a guest may not do, but a bug in it, or in
 * anything it calls, runs with all of the monitor's rights. Three walls behind it
 * (issue 12, items 6 and 7), each installed once setup is done and before the guest's
 * first instruction:
 *
 * - A seccomp filter (libseccomp) on every thread. It is an allow list built from the
 *   kernel header's whole system call table minus what the monitor never needs, so a
 *   call added to the monitor keeps working unless it is on the deny list, while a
 *   system call the header does not know is refused. The few calls whose arguments
 *   decide (ioctl, socket, clone) are allowed only for the values ccvm issues. A
 *   violation raises SIGSYS; the handler names the call and its first arguments on
 *   stderr and ends the process: a monitor that tried one is not to be trusted further.
 * - Landlock on the vCPU threads, which perform the guest's file operations: the
 *   kernel itself holds them to --root for reading, the harmless devices, and the --rw
 *   directories. The control thread and the snapshot writer are not restricted.
 * - A drop from root to --user's identity, so the guest's files, sockets and snapshot
 *   images are that user's.
 */
#include "confine.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <ucontext.h>
#include <unistd.h>

#include "syscall_names.h"

/* ---- seccomp ------------------------------------------------------------------ */

#define CONFINE_IOC_TYPE_MASK 0xff00ULL     /* _IOC_TYPE, in place */
#define CONFINE_IOC_NR_MASK   0xffffULL     /* _IOC_TYPE and _IOC_NR, in place */
#define CONFINE_IOC_CMD_MASK  0xffffffffULL /* the kernel reads an unsigned int */
#define CONFINE_IOC_KVM       (0xAEULL << 8)
#define CONFINE_IOC_UFFD      (0xAAULL << 8)
#define CONFINE_IOC_PAGEMAP_SCAN (('f' << 8) | 16ULL) /* Linux 6.7; any size */
#define CONFINE_SOCK_TYPE_MASK 0xfULL /* SOCK_NONBLOCK and SOCK_CLOEXEC above it */
#define CONFINE_CLONE_NS_MASK                                                           \
	((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |       \
		    CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME))
#define CONFINE_NR_NAMES (int)(sizeof(lx_syscall_names) / sizeof(lx_syscall_names[0]))

/* What the monitor never does once the guest runs: run programs, trace or read other
 * processes, change mounts or namespaces, load code into the kernel, reach its
 * keyrings or performance counters, change the clock, raise I/O privilege. */
static const int confine_denied[] = {
	__NR_execve,          __NR_execveat,         __NR_ptrace,
	__NR_process_vm_readv, __NR_process_vm_writev, __NR_mount,
	__NR_umount2,         __NR_pivot_root,       __NR_chroot,
	__NR_move_mount,      __NR_open_tree,        __NR_fsopen,
	__NR_fsconfig,        __NR_fsmount,          __NR_fspick,
	__NR_mount_setattr,   __NR_bpf,              __NR_keyctl,
	__NR_add_key,         __NR_request_key,      __NR_perf_event_open,
	__NR_unshare,         __NR_setns,            __NR_kexec_load,
	__NR_kexec_file_load, __NR_init_module,      __NR_finit_module,
	__NR_delete_module,   __NR_reboot,           __NR_swapon,
	__NR_swapoff,         __NR_acct,             __NR_open_by_handle_at,
	__NR_iopl,            __NR_ioperm,           __NR_quotactl,
	__NR_syslog,          __NR_vhangup,          __NR_settimeofday,
	__NR_clock_settime,   __NR_clock_adjtime,    __NR_uselib,
	__NR_fanotify_init,   __NR_lookup_dcookie,
	/* decided on their arguments below */
	__NR_ioctl,           __NR_socket,           __NR_socketpair,
	__NR_clone,           __NR_clone3,           __NR_rt_sigaction,
};

/* The ioctls the personality passes through by name (sys_ioctl), and isatty's. */
static const unsigned long confine_ioctls[] = {
	TCGETS, TCSETS, TCSETSW, TCSETSF, TIOCGWINSZ, FIONREAD, FIONBIO, TIOCGPGRP, FIOCLEX, FIONCLEX,
};

#if defined(__SANITIZE_ADDRESS__)
#define CONFINE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONFINE_SANITIZED 1
#endif
#endif

static bool confine_is_denied(int nr)
{
#ifdef CONFINE_SANITIZED
	/* LeakSanitizer stops the world with ptrace when a sanitized build exits. */
	if (nr == __NR_ptrace)
		return false;
#endif
	for (size_t i = 0; i < sizeof(confine_denied) / sizeof(confine_denied[0]); i++)
		if (confine_denied[i] == nr)
			return true;
	return false;
}

/* Async-signal-safe output for the SIGSYS handler. */
static size_t confine_put(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		buf[at++] = *s++;
	return at;
}

static size_t confine_put_hex(char *buf, size_t at, size_t cap, uint64_t v)
{
	char digits[19];
	int n = 0;

	do {
		digits[n++] = "0123456789abcdef"[v & 0xf];
		v >>= 4;
	} while (v);
	at = confine_put(buf, at, cap, "0x");
	while (n && at + 1 < cap)
		buf[at++] = digits[--n];
	return at;
}

static size_t confine_put_dec(char *buf, size_t at, size_t cap, unsigned v)
{
	char digits[12];
	int n = 0;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && at + 1 < cap)
		buf[at++] = digits[--n];
	return at;
}

/*
 * A filtered system call: say which, with its first three arguments (an ioctl's request,
 * a socket's family and type), and end the whole process. The one place besides main()
 * that exits: the monitor is in an unknown state, and returning would let the caller
 * go on with a failed call it never expected to fail.
 */
static void confine_sigsys(int sig, siginfo_t *si, void *uctx)
{
	const greg_t *g = ((ucontext_t *)uctx)->uc_mcontext.gregs;
	const char *name = NULL;
	char line[256];
	size_t n = 0;

	(void)sig;
	if (si->si_syscall >= 0 && si->si_syscall < CONFINE_NR_NAMES)
		name = lx_syscall_names[si->si_syscall];
	n = confine_put(line, n, sizeof(line), "ccvm: error: seccomp: the monitor made system call ");
	n = confine_put(line, n, sizeof(line), name ? name : "?");
	n = confine_put(line, n, sizeof(line), " (");
	n = confine_put_dec(line, n, sizeof(line), (unsigned)si->si_syscall);
	n = confine_put(line, n, sizeof(line), ") with ");
	n = confine_put_hex(line, n, sizeof(line), (uint64_t)g[REG_RDI]);
	n = confine_put(line, n, sizeof(line), ", ");
	n = confine_put_hex(line, n, sizeof(line), (uint64_t)g[REG_RSI]);
	n = confine_put(line, n, sizeof(line), ", ");
	n = confine_put_hex(line, n, sizeof(line), (uint64_t)g[REG_RDX]);
	n = confine_put(line, n, sizeof(line), ", which it never needs; stopping (a ccvm bug or an attack)\n");
	if (write(STDERR_FILENO, line, n) < 0)
		line[0] = 0;
	syscall(SYS_exit_group, CONFINE_EXIT_STATUS);
}

/* Allow @nr only when its argument @arg masked with @mask equals @datum. */
static int confine_allow_masked(scmp_filter_ctx ctx, int nr, unsigned arg, uint64_t mask,
				uint64_t datum)
{
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
				SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, mask, datum));
}

static int confine_rules_ioctl(scmp_filter_ctx ctx)
{
	int rc = confine_allow_masked(ctx, __NR_ioctl, 1, CONFINE_IOC_TYPE_MASK, CONFINE_IOC_KVM);

	if (!rc)
		rc = confine_allow_masked(ctx, __NR_ioctl, 1, CONFINE_IOC_TYPE_MASK, CONFINE_IOC_UFFD);
	if (!rc)
		rc = confine_allow_masked(ctx, __NR_ioctl, 1, CONFINE_IOC_NR_MASK,
					  CONFINE_IOC_PAGEMAP_SCAN);
	for (size_t i = 0; !rc && i < sizeof(confine_ioctls) / sizeof(confine_ioctls[0]); i++)
		rc = confine_allow_masked(ctx, __NR_ioctl, 1, CONFINE_IOC_CMD_MASK, confine_ioctls[i]);
	return rc;
}

/* Sockets: Unix ones of any type, TCP and UDP, and rtnetlink (glibc's getaddrinfo
 * asks it which address families exist); never raw or packet ones. */
static int confine_rules_socket(scmp_filter_ctx ctx)
{
	static const int inet[] = { AF_INET, AF_INET6 }, types[] = { SOCK_STREAM, SOCK_DGRAM };
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_socket, 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0));

	for (int f = 0; !rc && f < 2; f++)
		for (int t = 0; !rc && t < 2; t++)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_socket, 2,
					      SCMP_A0(SCMP_CMP_EQ, (uint64_t)inet[f], 0),
					      SCMP_A1(SCMP_CMP_MASKED_EQ, CONFINE_SOCK_TYPE_MASK,
						      (uint64_t)types[t]));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_socket, 2,
				      SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0), SCMP_A2(SCMP_CMP_EQ, 0, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_socketpair, 1,
				      SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0));
	return rc;
}

/* Threads, never namespaces. clone3 passes its flags in memory a filter cannot read:
 * it fails with ENOSYS, and glibc falls back to clone. Nothing may take SIGSYS over. */
static int confine_rules_process(scmp_filter_ctx ctx)
{
	int rc = confine_allow_masked(ctx, __NR_clone, 0, CONFINE_CLONE_NS_MASK, 0);

	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), __NR_clone3, 0);
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_rt_sigaction, 1,
				      SCMP_A0(SCMP_CMP_NE, SIGSYS, 0));
	return rc;
}

static int confine_build(scmp_filter_ctx ctx)
{
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);

	if (!rc)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2); /* a binary tree */
	for (int nr = 0; !rc && nr < CONFINE_NR_NAMES; nr++)
		if (lx_syscall_names[nr] && !confine_is_denied(nr))
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	if (!rc)
		rc = confine_rules_ioctl(ctx);
	if (!rc)
		rc = confine_rules_socket(ctx);
	if (!rc)
		rc = confine_rules_process(ctx);
	return rc;
}

int confine_seccomp(char err[CONFINE_ERR_LEN])
{
	struct sigaction sa = { .sa_sigaction = confine_sigsys, .sa_flags = SA_SIGINFO };
	scmp_filter_ctx ctx;
	int rc;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		rc = -errno;
		log_set_err(rc, err, CONFINE_ERR_LEN, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(-rc));
		return rc;
	}
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0) {
		rc = -errno;
		log_set_err(rc, err, CONFINE_ERR_LEN, "sigaction(SIGSYS): %s", strerror(-rc));
		return rc;
	}
	ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx)
		return log_set_err(-ENOMEM, err, CONFINE_ERR_LEN, "seccomp_init failed");
	rc = confine_build(ctx);
	if (rc)
		log_set_err(rc, err, CONFINE_ERR_LEN, "building the seccomp filter: %s", strerror(-rc));
	else if ((rc = seccomp_load(ctx)))
		log_set_err(rc, err, CONFINE_ERR_LEN, "loading the seccomp filter: %s", strerror(-rc));
	seccomp_release(ctx);
	return rc;
}

/* ---- Landlock ------------------------------------------------------------------ */

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3, Linux 6.2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5, Linux 6.10 */
#endif

#define CONFINE_LL_ABI_TRUNCATE  3
#define CONFINE_LL_ABI_IOCTL_DEV 5
#define CONFINE_LL_FILE                                                                  \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | \
	 LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define CONFINE_LL_READ   (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define CONFINE_LL_DEVICE                                                                \
	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |                   \
	 LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* The devices path.c lets a guest write wherever they are (fs_harmless_chardev). */
static const char *const confine_devices[] = {
	"dev/null", "dev/zero", "dev/full", "dev/random", "dev/urandom", "dev/tty", "dev/pts",
};

/* Every file-system right this kernel's Landlock knows (so all of them are handled). */
static uint64_t confine_ll_handled(int abi)
{
	uint64_t all = (LANDLOCK_ACCESS_FS_REFER << 1) - 1; /* ABI 1 and 2 */

	if (abi < 2)
		all &= ~LANDLOCK_ACCESS_FS_REFER;
	if (abi >= CONFINE_LL_ABI_TRUNCATE)
		all |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= CONFINE_LL_ABI_IOCTL_DEV)
		all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return all;
}

/* Allow @access beneath @path (only file rights when it is not a directory). A path
 * that does not exist gets no rule: nothing beneath it can be reached either. */
static int confine_ll_rule(int ruleset, const char *path, uint64_t access, uint64_t handled,
			   char err[CONFINE_ERR_LEN])
{
	struct landlock_path_beneath_attr pb = { 0 };
	struct stat st;
	int rc = 0;

	pb.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (pb.parent_fd < 0)
		return errno == ENOENT ? 0 : log_set_err(-errno, err, CONFINE_ERR_LEN,
							  "Landlock: cannot open %s: %s", path,
							  strerror(errno));
	if (fstat(pb.parent_fd, &st) == 0 && !S_ISDIR(st.st_mode))
		access &= CONFINE_LL_FILE;
	pb.allowed_access = access & handled;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		rc = log_set_err(-errno, err, CONFINE_ERR_LEN, "Landlock: rule for %s: %s", path,
				 strerror(errno));
	close(pb.parent_fd);
	return rc;
}

static int confine_ll_rules(int ruleset, const struct confine_fs *fs, uint64_t handled,
			    char err[CONFINE_ERR_LEN])
{
	char path[4096];
	int rc = confine_ll_rule(ruleset, fs->root, CONFINE_LL_READ, handled, err);

	for (size_t i = 0; !rc && i < sizeof(confine_devices) / sizeof(confine_devices[0]); i++) {
		if (snprintf(path, sizeof(path), "%s/%s", fs->root, confine_devices[i]) >=
		    (int)sizeof(path))
			return log_set_err(-ENAMETOOLONG, err, CONFINE_ERR_LEN, "Landlock: %s: %s",
					   fs->root, strerror(ENAMETOOLONG));
		rc = confine_ll_rule(ruleset, path, CONFINE_LL_DEVICE | LANDLOCK_ACCESS_FS_READ_DIR,
				     handled, err);
	}
	for (int i = 0; !rc && i < fs->n_rw; i++)
		rc = confine_ll_rule(ruleset, fs->rw[i], handled, handled, err);
	return rc;
}

int confine_landlock(const struct confine_fs *fs, char err[CONFINE_ERR_LEN])
{
	struct landlock_ruleset_attr attr = { 0 };
	int abi, ruleset, rc;

	abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0)
		return log_set_err(-EOPNOTSUPP, err, CONFINE_ERR_LEN,
				   "this kernel has no Landlock (%s)", strerror(errno));
	attr.handled_access_fs = confine_ll_handled(abi);
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0)
		return log_set_err(-errno, err, CONFINE_ERR_LEN, "Landlock: creating a ruleset: %s",
				   strerror(errno));
	rc = confine_ll_rules(ruleset, fs, attr.handled_access_fs, err);
	if (!rc && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		rc = log_set_err(-errno, err, CONFINE_ERR_LEN, "prctl(PR_SET_NO_NEW_PRIVS): %s",
				 strerror(errno));
	if (!rc && syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		rc = log_set_err(-errno, err, CONFINE_ERR_LEN, "Landlock: restricting the thread: %s",
				 strerror(errno));
	close(ruleset);
	return rc;
}

/* ---- the user ------------------------------------------------------------------ */

#define CONFINE_PW_BUF 16384

/* A decimal id of at most 9 digits (no sign, no spaces); -1 if @s is not one. */
static long confine_number(const char *s)
{
	long v = 0;

	if (!*s || strlen(s) > 9)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

static int confine_parse_user(const char *user, struct confine_user *u, bool *has_gid,
			      char err[CONFINE_ERR_LEN])
{
	static char buf[CONFINE_PW_BUF];
	struct passwd pw, *res = NULL;
	long id = confine_number(user);

	if (id >= 0)
		getpwuid_r((uid_t)id, &pw, buf, sizeof(buf), &res);
	else
		getpwnam_r(user, &pw, buf, sizeof(buf), &res);
	if (!res && id < 0)
		return log_set_err(-ENOENT, err, CONFINE_ERR_LEN, "--user: no user named '%s'", user);
	u->uid = res ? res->pw_uid : (uid_t)id;
	*has_gid = res != NULL;
	if (res) {
		u->gid = res->pw_gid;
		if (strlen(res->pw_name) >= sizeof(u->name))
			return log_set_err(-ENAMETOOLONG, err, CONFINE_ERR_LEN,
					   "--user: the name '%s' is too long", res->pw_name);
		strcpy(u->name, res->pw_name);
	}
	return 0;
}

static int confine_parse_group(const char *group, struct confine_user *u, char err[CONFINE_ERR_LEN])
{
	static char buf[CONFINE_PW_BUF];
	struct group gr, *res = NULL;
	long id = confine_number(group);

	if (id >= 0) {
		u->gid = (gid_t)id;
		return 0;
	}
	getgrnam_r(group, &gr, buf, sizeof(buf), &res);
	if (!res)
		return log_set_err(-ENOENT, err, CONFINE_ERR_LEN, "--user: no group named '%s'", group);
	u->gid = res->gr_gid;
	return 0;
}

int confine_user_parse(const char *spec, struct confine_user *u, char err[CONFINE_ERR_LEN])
{
	char copy[2 * CONFINE_NAME_MAX], *colon;
	bool has_gid = false;
	int rc;

	memset(u, 0, sizeof(*u));
	if (!*spec || strlen(spec) >= sizeof(copy))
		return log_set_err(-EINVAL, err, CONFINE_ERR_LEN,
				   "--user '%.64s': expected USER or USER:GROUP (names or numbers)",
				   spec);
	strcpy(copy, spec);
	colon = strchr(copy, ':');
	if (colon)
		*colon++ = '\0';
	if (!copy[0] || (colon && !*colon))
		return log_set_err(-EINVAL, err, CONFINE_ERR_LEN,
				   "--user '%s': expected USER or USER:GROUP (names or numbers)", spec);
	rc = confine_parse_user(copy, u, &has_gid, err);
	if (!rc && colon)
		rc = confine_parse_group(colon, u, err);
	else if (!rc && !has_gid)
		rc = log_set_err(-EINVAL, err, CONFINE_ERR_LEN,
				 "--user %s: uid %u has no passwd entry to take a group from; "
				 "give --user %s:GROUP",
				 spec, (unsigned)u->uid, spec);
	return rc;
}

static int confine_set_groups(const struct confine_user *u, char err[CONFINE_ERR_LEN])
{
	int rc = u->name[0] ? initgroups(u->name, u->gid) : setgroups(1, &u->gid);

	if (rc < 0)
		return log_set_err(-errno, err, CONFINE_ERR_LEN, "--user: setting groups: %s",
				   strerror(errno));
	return 0;
}

int confine_drop_user(const struct confine_user *u, char err[CONFINE_ERR_LEN])
{
	int rc;

	if (geteuid() != 0)
		return log_set_err(-EPERM, err, CONFINE_ERR_LEN,
				   "--user needs a monitor started as root (this one runs as uid %u)",
				   (unsigned)geteuid());
	rc = confine_set_groups(u, err);
	if (rc)
		return rc;
	if (setresgid(u->gid, u->gid, u->gid) < 0 || setresuid(u->uid, u->uid, u->uid) < 0)
		return log_set_err(-errno, err, CONFINE_ERR_LEN, "--user: becoming %u:%u: %s",
				   (unsigned)u->uid, (unsigned)u->gid, strerror(errno));
	/* Belt and braces: a drop that could be undone is no drop. */
	if (u->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
		return log_set_err(-EPERM, err, CONFINE_ERR_LEN, "--user: root could be regained");
	return 0;
}
