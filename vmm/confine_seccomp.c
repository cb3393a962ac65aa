/*
 * confine_seccomp.c - the monitor's seccomp filters: allow lists, one per thread role.
 *
 * Once the VM is built (confine_monitor), the whole process gets a filter that allows
 * what some thread of the monitor calls: every role's list below, and what the main
 * thread does until the end. Each thread then stacks its own role's filter when it
 * starts (role_enter): the kernel runs both, so a thread makes only the calls both
 * allow. A vCPU makes the guest's file and socket calls; the control thread serves
 * its socket and starts snapshots; a snapshot worker writes; the timer thread only
 * waits and signals. The lists are what the e2e suite made, thread by thread (traced
 * under a logging filter), and what each role's code calls on paths the suite does
 * not take (errors, the fork policy). The calls whose arguments decide are allowed
 * only for the values ccvm issues: ioctls of KVM, each of userfaultfd's and
 * PAGEMAP_SCAN whole, and the few terminal requests the personality passes on; Unix,
 * TCP and UDP sockets of their own protocols (netlink fails with EAFNOSUPPORT); clone
 * without new namespaces; prctl to name a thread; any rt_sigaction but SIGSYS's;
 * tgkill, prlimit64 and the priority calls on the monitor's own pid or thread only. A
 * call of another architecture ends the process at once (KILL_PROCESS).
 *
 * Anything else raises SIGSYS: the handler names the thread's role, the call and its
 * first arguments on stderr and ends the process (status 159), since a monitor that
 * tried one is not to be trusted further. The kernel's log has it too.
 *
 * Each filter is compiled to BPF once, before the first thread starts, so a thread
 * only loads its own.
 */
#include "confine.h"
#include "../base/log.h"
#include "../base/role.h"
#include "../mmu/resident.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/userfaultfd.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <ucontext.h>
#include <unistd.h>

#include "syscall_names.h"

#define CONFINE_IOC_TYPE_MASK 0xff00ULL     /* _IOC_TYPE, in place */
#define CONFINE_IOC_CMD_MASK  0xffffffffULL /* the kernel reads an unsigned int */
#define CONFINE_IOC_KVM       (0xAEULL << 8)
#define CONFINE_SOCK_TYPE_MASK 0xfULL /* SOCK_NONBLOCK and SOCK_CLOEXEC above it */
#define CONFINE_CLONE_NS_MASK                                                           \
	((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |       \
		    CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME))
#define CONFINE_NR_NAMES (int)(sizeof(lx_syscall_names) / sizeof(lx_syscall_names[0]))
#define CONFINE_N(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__SANITIZE_ADDRESS__)
#define CONFINE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONFINE_SANITIZED 1
#endif
#endif

/* What every thread calls: glibc's threads, memory, locks, clocks and random bytes;
 * messages on stderr; stacking its role's filter and giving up capabilities. */
static const int calls_common[] = {
	__NR_read, __NR_write, __NR_writev, __NR_close, __NR_futex, __NR_exit,
	__NR_exit_group, __NR_rt_sigprocmask, __NR_rt_sigreturn, __NR_madvise, __NR_mmap,
	__NR_munmap, __NR_mprotect, __NR_mremap, __NR_brk, __NR_set_robust_list, __NR_rseq,
	__NR_gettid, __NR_getpid, __NR_clock_gettime, __NR_clock_nanosleep, __NR_nanosleep,
	__NR_gettimeofday, __NR_time, /* the vDSO's, made real where the clock has no vDSO */
	__NR_sched_yield, __NR_restart_syscall, __NR_getrandom,
	__NR_sched_getaffinity, __NR_newfstatat, __NR_fstat, __NR_seccomp,
	/* Giving up root's capabilities as a thread starts (confine_caps.c), whatever role
	 * made it: a thread inherits its maker's filters. capset only lowers here: a
	 * thread holds nothing it could raise that the process did not keep. */
	__NR_capget, __NR_capset,
#ifdef CONFINE_SANITIZED
	/* AddressSanitizer: each thread's alternate stack, and its reports (which read
	 * /proc with the old open and getdents). */
	__NR_sigaltstack, __NR_openat, __NR_open, __NR_readlink, __NR_lseek, __NR_getdents64,
	__NR_getdents,
#endif
};

/* A guest thread's system calls, made on the host by the personality (vmm/linux/). */
static const int calls_vcpu[] = {
	__NR_readv, __NR_pread64, __NR_preadv, __NR_pwrite64, __NR_pwritev, __NR_lseek,
	__NR_openat, __NR_openat2, __NR_statx, __NR_fstatfs, __NR_statfs, __NR_getdents64,
	__NR_readlinkat, __NR_readlink, __NR_faccessat2, __NR_access, __NR_mkdirat,
	__NR_unlinkat, __NR_unlink, __NR_renameat2, __NR_renameat, __NR_symlinkat,
	__NR_linkat, __NR_fchmodat, __NR_fchmod, __NR_ftruncate, __NR_fsync, __NR_fdatasync,
	__NR_fadvise64, __NR_fcntl, __NR_flock, __NR_umask, __NR_getcwd, __NR_pipe2, __NR_dup,
	__NR_dup2, __NR_dup3, __NR_bind, __NR_listen, __NR_accept4, __NR_connect,
	__NR_getsockname, __NR_getpeername, __NR_sendto, __NR_recvfrom, __NR_sendmsg,
	__NR_recvmsg, __NR_setsockopt, __NR_getsockopt, __NR_shutdown, __NR_poll, __NR_ppoll,
	__NR_epoll_create1, __NR_epoll_ctl, __NR_epoll_wait, __NR_epoll_pwait, __NR_eventfd2,
	__NR_timerfd_create, __NR_timerfd_settime, __NR_timerfd_gettime, __NR_memfd_create,
	__NR_mincore, __NR_getuid, __NR_geteuid, __NR_getgid, __NR_getegid, __NR_getgroups,
	__NR_getpgid, __NR_getppid, __NR_getsid, __NR_getrusage,
	__NR_sysinfo, __NR_times, __NR_uname, __NR_sigaltstack, __NR_chmod, __NR_getpgrp,
	__NR_sync_file_range,
};

/* The control socket; a snapshot's start and end (capture, the image's directory,
 * write protection, the fork policy's child); --snapshot-log. */
static const int calls_control[] = {
	__NR_accept4, __NR_poll, __NR_ppoll, __NR_recvfrom, __NR_recvmsg, __NR_sendto,
	__NR_sendmsg, __NR_getsockopt, __NR_setsockopt, __NR_shutdown, __NR_getsockname,
	__NR_getpeername, __NR_fcntl, __NR_openat, __NR_lseek, __NR_pread64, __NR_pwrite64,
	__NR_fsync, __NR_fdatasync, __NR_ftruncate, __NR_flock, __NR_getdents64,
	__NR_unlinkat, __NR_unlink, __NR_renameat, __NR_renameat2, __NR_rename,
	__NR_readlinkat, __NR_readlink, __NR_fstatfs, __NR_statx, __NR_mincore,
	__NR_userfaultfd, __NR_wait4, __NR_pipe2, __NR_eventfd2, __NR_getrusage, __NR_getppid,
	__NR_fadvise64, __NR_getuid, __NR_geteuid, /* whose peer may drive the socket */
	__NR_getcwd, /* realpath of a relative --parent */
	__NR_tee, /* the bytes in a guest pipe, read without taking them (fdstate.c) */
	__NR_sysinfo, /* glibc's qsort sizes its buffer by the RAM (schedule.c) */
	__NR_connect, /* ctl migrate: to the destination (migrate.c) */
	__NR_listen, /* and the guest's listeners again after it failed (ptree.c) */
	/* ctl exec: the program found in the guest's root, its auxv's ids */
	__NR_openat2, __NR_faccessat2, __NR_getgid, __NR_getegid,
};

/* Writing a snapshot: the writer, its I/O threads, copy-on-write faults and copies,
 * the squeezer, the fork policy's waiter. */
static const int calls_snapshot[] = {
	__NR_poll, __NR_pread64, __NR_pwrite64, __NR_fsync, __NR_fdatasync, __NR_ftruncate,
	__NR_openat, __NR_renameat, __NR_renameat2, __NR_rename, __NR_fstatfs, __NR_fcntl,
	__NR_flock, __NR_getdents64, __NR_unlinkat, __NR_lseek, __NR_mincore,
	__NR_wait4, __NR_getrusage, __NR_getppid, __NR_readlinkat, __NR_readlink, __NR_unlink,
	__NR_getcwd, __NR_sysinfo, /* periodic snapshots: the oldest removed (schedule.c) */
};

/* The guest's POSIX timers: wait (futex, clock_nanosleep) and signal a vCPU (tgkill),
 * all in calls_common; nothing of its own. */
static const int calls_timer[] = { __NR_futex };

/* Signals from outside, the fastio flusher, the coverage tracker, loading a restored
 * image's memory. */
static const int calls_helper[] = {
	__NR_rt_sigtimedwait, __NR_poll, __NR_ppoll, __NR_pread64, __NR_epoll_wait,
	__NR_epoll_pwait, __NR_sendto, __NR_sendmsg, __NR_fcntl, __NR_mincore, __NR_openat,
	__NR_lseek, __NR_getrusage, __NR_fstatfs, __NR_getuid, __NR_geteuid, __NR_readlink,
};

/* The main thread once the VM runs: it waits, then tears down (the control socket's
 * file removed). A restore builds the guest's process after confinement: its files
 * reopened, its sockets made again. */
static const int calls_main[] = {
	__NR_unlink, __NR_unlinkat, __NR_wait4,
#ifdef CONFINE_SANITIZED
	__NR_ptrace, __NR_getppid, /* LeakSanitizer stops the world with ptrace at exit */
#endif
};

/* Which argument-checked calls a role makes. */
enum {
	CALLS_IOCTL_KVM = 1 << 0,   /* KVM's ioctls */
	CALLS_IOCTL_UFFD = 1 << 1,  /* userfaultfd's, and PAGEMAP_SCAN */
	CALLS_IOCTL_TTY = 1 << 2,   /* the terminal and FIO requests passed through */
	CALLS_SOCKETS = 1 << 3,     /* socket, socketpair */
	CALLS_THREADS = 1 << 4,     /* clone without namespaces (threads, the fork child) */
	CALLS_SIGACTION = 1 << 5,   /* rt_sigaction, never for SIGSYS */
	CALLS_PRIORITY = 1 << 6,    /* the calling thread's nice value and policy */
	CALLS_KILL = 1 << 7,        /* kill: 0 (is it alive?) or SIGKILL (the fork child) */
};

struct confine_calls {
	const int *nr;
	size_t n;
	unsigned args;
};

static const struct confine_calls confine_roles[ROLE_COUNT] = {
	[ROLE_VCPU] = { calls_vcpu, CONFINE_N(calls_vcpu),
			CALLS_IOCTL_KVM | CALLS_IOCTL_TTY | CALLS_SOCKETS | CALLS_THREADS |
			CALLS_SIGACTION },
	[ROLE_CONTROL] = { calls_control, CONFINE_N(calls_control),
			   CALLS_IOCTL_KVM | CALLS_IOCTL_UFFD | CALLS_THREADS | CALLS_SIGACTION |
			   CALLS_SOCKETS | CALLS_PRIORITY | CALLS_KILL },
	[ROLE_SNAPSHOT] = { calls_snapshot, CONFINE_N(calls_snapshot),
			    CALLS_IOCTL_UFFD | CALLS_THREADS | CALLS_PRIORITY | CALLS_KILL },
	[ROLE_TIMER] = { calls_timer, CONFINE_N(calls_timer), 0 },
	[ROLE_HELPER] = { calls_helper, CONFINE_N(calls_helper),
			  CALLS_IOCTL_KVM | CALLS_IOCTL_UFFD | CALLS_THREADS },
};

/* The ioctls the personality passes through by name (sys_ioctl), and isatty's. */
static const unsigned long confine_ioctls[] = {
	TCGETS, TCSETS, TCSETSW, TCSETSF, TIOCGWINSZ, FIONREAD, FIONBIO, TIOCGPGRP, FIOCLEX, FIONCLEX,
};

/* userfaultfd's requests that ccvm makes, each whole, and PAGEMAP_SCAN (mmu/resident.c):
 * a mask on the type alone would admit any other driver's request of that type. */
static const unsigned long confine_ioctls_uffd[] = {
	USERFAULTFD_IOC_NEW, /* a new one from /dev/userfaultfd (mmu/uffd.c) */
	UFFDIO_API, UFFDIO_REGISTER, UFFDIO_UNREGISTER, UFFDIO_WAKE, UFFDIO_COPY,
	UFFDIO_ZEROPAGE, UFFDIO_WRITEPROTECT, RES_PAGEMAP_SCAN,
};

/* Each role's filter, compiled once (the process's is loaded and freed at once). */
static struct sock_fprog confine_bpf[ROLE_COUNT];
static bool confine_roles_on;

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
	n = confine_put(line, n, sizeof(line), "ccvm: error: seccomp: the monitor's ");
	n = confine_put(line, n, sizeof(line), role_current_name());
	n = confine_put(line, n, sizeof(line), " thread made system call ");
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

static int confine_rules_ioctl(scmp_filter_ctx ctx, unsigned args)
{
	int rc = 0;

	if (args & CALLS_IOCTL_KVM)
		rc = confine_allow_masked(ctx, __NR_ioctl, 1, CONFINE_IOC_TYPE_MASK, CONFINE_IOC_KVM);
	for (size_t i = 0; !rc && (args & CALLS_IOCTL_UFFD) && i < CONFINE_N(confine_ioctls_uffd); i++)
		rc = confine_allow_masked(ctx, __NR_ioctl, 1, CONFINE_IOC_CMD_MASK,
					  confine_ioctls_uffd[i]);
	for (size_t i = 0; !rc && (args & CALLS_IOCTL_TTY) && i < CONFINE_N(confine_ioctls); i++)
		rc = confine_allow_masked(ctx, __NR_ioctl, 1, CONFINE_IOC_CMD_MASK, confine_ioctls[i]);
	return rc;
}

/* Sockets: Unix ones of any type, TCP and UDP, each with protocol 0 or its own
 * (net.c's lx_net_socket_ok, which a guest's and an image's sockets pass first); never
 * raw, packet or netlink ones. glibc's getaddrinfo asks rtnetlink which address
 * families exist: it gets EAFNOSUPPORT and takes both to exist. */
static int confine_rules_socket(scmp_filter_ctx ctx)
{
	static const int inet[] = { AF_INET, AF_INET6 }, types[] = { SOCK_STREAM, SOCK_DGRAM },
			 protos[] = { IPPROTO_TCP, IPPROTO_UDP };
	int rc = 0;

	for (int f = 0; !rc && f < 2; f++)
		for (int t = 0; !rc && t < 2; t++)
			for (int pr = 0; !rc && pr < 2; pr++)
				rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_socket, 3,
						      SCMP_A0(SCMP_CMP_EQ, (uint64_t)inet[f], 0),
						      SCMP_A1(SCMP_CMP_MASKED_EQ, CONFINE_SOCK_TYPE_MASK,
							      (uint64_t)types[t]),
						      SCMP_A2(SCMP_CMP_EQ, pr ? (uint64_t)protos[t] : 0, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_socket, 2,
				      SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0), SCMP_A2(SCMP_CMP_EQ, 0, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), __NR_socket, 1,
				      SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_socketpair, 2,
				      SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0), SCMP_A2(SCMP_CMP_EQ, 0, 0));
	return rc;
}

/* Calls that name a process or thread, only for the monitor's own: a signal to one of
 * its threads, its own limits, the calling thread's nice value and policy (which is what
 * pid 0 means to the kernel for those). */
static int confine_rules_own(scmp_filter_ctx ctx, unsigned args)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_tgkill, 1,
				  SCMP_A0(SCMP_CMP_EQ, (uint64_t)getpid(), 0));

	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_prlimit64, 1,
				      SCMP_A0(SCMP_CMP_EQ, 0, 0));
	if (!rc && (args & CALLS_PRIORITY))
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_setpriority, 2,
				      SCMP_A0(SCMP_CMP_EQ, PRIO_PROCESS, 0), SCMP_A1(SCMP_CMP_EQ, 0, 0));
	if (!rc && (args & CALLS_PRIORITY))
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_getpriority, 2,
				      SCMP_A0(SCMP_CMP_EQ, PRIO_PROCESS, 0), SCMP_A1(SCMP_CMP_EQ, 0, 0));
	if (!rc && (args & CALLS_PRIORITY))
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_sched_setscheduler, 1,
				      SCMP_A0(SCMP_CMP_EQ, 0, 0));
	/* kill names any pid, so its signal is bounded: 0 asks whether a temporary's
	 * writer lives (snapshot/image_write.c), SIGKILL ends the fork policy's child.
	 * Where Landlock scopes signals (ABI 6), only processes of the monitor's own
	 * domain can receive even those. */
	if (!rc && (args & CALLS_KILL))
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_kill, 1,
				      SCMP_A1(SCMP_CMP_EQ, 0, 0));
	if (!rc && (args & CALLS_KILL))
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_kill, 1,
				      SCMP_A1(SCMP_CMP_EQ, SIGKILL, 0));
	return rc;
}

/* Threads and the fork child, never namespaces. clone3 passes its flags in memory a
 * filter cannot read: it fails with ENOSYS, and glibc falls back to clone. A thread
 * names itself with prctl, the fork child asks to die with its parent; nothing may
 * take SIGSYS over. */
static int confine_rules_process(scmp_filter_ctx ctx, unsigned args)
{
	int rc = 0;

	if (args & CALLS_THREADS)
		rc = confine_allow_masked(ctx, __NR_clone, 0, CONFINE_CLONE_NS_MASK, 0);
	if (!rc && (args & CALLS_THREADS))
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), __NR_clone3, 0);
	if (!rc && (args & CALLS_SIGACTION))
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_rt_sigaction, 1,
				      SCMP_A0(SCMP_CMP_NE, SIGSYS, 0));
#ifdef CONFINE_SANITIZED
	if (!rc) /* the sanitizers' own uses (dumpable, ptracer, death signal) */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_prctl, 0);
	/* A report asks isatty(2) first: without it the filter stopped the thread that
	 * found a bug and its report was lost (UBSan in the control thread, seen). */
	if (!rc && !(args & CALLS_IOCTL_TTY))
		rc = confine_allow_masked(ctx, __NR_ioctl, 1, CONFINE_IOC_CMD_MASK, TCGETS);
#else
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_prctl, 1,
				      SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_prctl, 1,
				      SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME, 0));
	if (!rc && (args & CALLS_THREADS)) /* the fork policy's child dies with ccvm */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, __NR_prctl, 1,
				      SCMP_A0(SCMP_CMP_EQ, PR_SET_PDEATHSIG, 0));
#endif
	return rc;
}

/* Allow each of @nr; one already allowed (the lists overlap) is no error. */
static int confine_add_list(scmp_filter_ctx ctx, const int *nr, size_t n)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < n; i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr[i], 0);
		if (rc == -EEXIST)
			rc = 0;
	}
	return rc;
}

/* The rules of @role (ROLE_COUNT: the process's, every role's and the main thread's). */
static int confine_rules(scmp_filter_ctx ctx, int role)
{
	unsigned args = 0;
	int rc = confine_add_list(ctx, calls_common, CONFINE_N(calls_common));

	for (int r = 0; !rc && r < ROLE_COUNT; r++) {
		if (role != ROLE_COUNT && r != role)
			continue;
		rc = confine_add_list(ctx, confine_roles[r].nr, confine_roles[r].n);
		args |= confine_roles[r].args;
	}
	if (!rc && role == ROLE_COUNT) {
		rc = confine_add_list(ctx, calls_main, CONFINE_N(calls_main));
		args |= CALLS_KILL; /* teardown may end a fork child (forkpol_abandon) */
	}
	if (!rc)
		rc = confine_rules_ioctl(ctx, args);
	if (!rc && (args & CALLS_SOCKETS))
		rc = confine_rules_socket(ctx);
	if (!rc)
		rc = confine_rules_own(ctx, args);
	if (!rc)
		rc = confine_rules_process(ctx, args);
	return rc;
}

/* Compile the filter of @role into @out (its BPF program, malloc'd). */
static int confine_compile(int role, struct sock_fprog *out)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	int fd = -1, rc;
	off_t len;

	if (!ctx)
		return -ENOMEM;
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2); /* a binary tree */
	/* A call of another architecture (int 0x80, x32) is no monitor's: the whole
	 * process ends, not only the thread that made it. */
	if (!rc)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* A role's filter is one thread's; adding to a filter needs no new privileges
	 * (NO_NEW_PRIVS is set), and libseccomp would otherwise set it again. */
	if (!rc)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (!rc)
		rc = confine_rules(ctx, role);
	if (!rc && (fd = memfd_create("ccvm-seccomp", MFD_CLOEXEC)) < 0)
		rc = -errno;
	if (!rc)
		rc = seccomp_export_bpf(ctx, fd);
	if (!rc && ((len = lseek(fd, 0, SEEK_END)) <= 0 || len % sizeof(struct sock_filter)))
		rc = -EIO;
	if (!rc) {
		out->len = (unsigned short)(len / (off_t)sizeof(struct sock_filter));
		out->filter = malloc((size_t)len);
		if (!out->filter || pread(fd, out->filter, (size_t)len, 0) != len)
			rc = -EIO;
	}
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	return rc;
}

/* Load @prog on the calling thread, or with @all on every thread of the process. */
static int confine_load(const struct sock_fprog *prog, bool all)
{
	long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			  all ? SECCOMP_FILTER_FLAG_TSYNC : 0, prog);

	if (rc < 0)
		return -errno;
	return rc > 0 ? -EBUSY : 0; /* TSYNC: the id of a thread that could not follow */
}

static int confine_role_hook(enum role r)
{
	sigset_t sys;
	int caps, rc;

	if (r < 0 || r >= ROLE_COUNT || !confine_roles_on)
		return -EINVAL;
	caps = confine_caps_role(r); /* the thread's capabilities, then its filter */
	/* Blocked, a filtered call would kill the process without a word. */
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
	rc = confine_load(&confine_bpf[r], false);
	return rc ? rc : caps;
}

int confine_seccomp(char err[CONFINE_ERR_LEN])
{
	struct sigaction sa = { .sa_sigaction = confine_sigsys, .sa_flags = SA_SIGINFO };
	struct sock_fprog process = { 0 };
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
	rc = confine_compile(ROLE_COUNT, &process);
	for (int r = 0; !rc && r < ROLE_COUNT; r++)
		if (!confine_bpf[r].filter)
			rc = confine_compile(r, &confine_bpf[r]);
	if (rc)
		return log_set_err(rc, err, CONFINE_ERR_LEN, "building the seccomp filters: %s",
				   strerror(-rc));
	rc = confine_load(&process, true);
	free(process.filter);
	if (rc)
		return log_set_err(rc, err, CONFINE_ERR_LEN, "loading the seccomp filter: %s",
				   strerror(-rc));
	confine_roles_on = true;
	role_set_hook(confine_role_hook);
	return 0;
}
