/*
 * systab.h - the system calls the personality offers: one entry per call with its
 * support note, from which the dispatcher's table (syscall.c), the handlers'
 * declarations (sys.h) and the list in docs/compatibility.md are made
 * (scripts/check-layers.py --docs writes that list, and `make layers` fails when it is
 * stale).
 *
 * X(name, support, note): the handler is sys_NAME in a sys_*.c file. LX_FULL: as on
 * Linux, within what every call is held to (paths inside --root, written only under
 * --rw; ports as published; the user who started ccvm); the note, if any, says where
 * that shows. LX_PARTIAL: the note says what is missing. A call not listed answers
 * ENOSYS and is logged once by name.
 */
#ifndef CCVM_LX_SYSTAB_H
#define CCVM_LX_SYSTAB_H

enum lx_support { LX_FULL, LX_PARTIAL };

#define LX_SYSCALLS(X) \
	X(read, LX_FULL, "") \
	X(write, LX_FULL, "") \
	X(readv, LX_FULL, "") \
	X(writev, LX_FULL, "") \
	X(pread64, LX_FULL, "") \
	X(pwrite64, LX_FULL, "") \
	X(open, LX_FULL, "paths resolved inside --root; created or written only under --rw") \
	X(openat, LX_FULL, "as open") \
	X(close, LX_FULL, "") \
	X(close_range, LX_FULL, "") \
	X(lseek, LX_FULL, "") \
	X(fstat, LX_FULL, "") \
	X(newfstatat, LX_FULL, "") \
	X(stat, LX_FULL, "") \
	X(lstat, LX_FULL, "") \
	X(statx, LX_FULL, "") \
	X(statfs, LX_FULL, "") \
	X(fstatfs, LX_FULL, "") \
	X(access, LX_FULL, "") \
	X(faccessat, LX_FULL, "") \
	X(faccessat2, LX_FULL, "") \
	X(readlink, LX_FULL, "/proc/self/exe reads as the guest's program") \
	X(readlinkat, LX_FULL, "as readlink") \
	X(getcwd, LX_FULL, "the guest's path, inside --root") \
	X(chdir, LX_FULL, "") \
	X(fchdir, LX_FULL, "") \
	X(mkdir, LX_FULL, "only under --rw") \
	X(mkdirat, LX_FULL, "only under --rw") \
	X(unlink, LX_FULL, "only under --rw") \
	X(unlinkat, LX_FULL, "only under --rw") \
	X(rmdir, LX_FULL, "only under --rw") \
	X(rename, LX_FULL, "only under --rw") \
	X(renameat, LX_FULL, "only under --rw") \
	X(renameat2, LX_FULL, "only under --rw") \
	X(symlink, LX_FULL, "only under --rw") \
	X(symlinkat, LX_FULL, "only under --rw") \
	X(link, LX_FULL, "only under --rw") \
	X(linkat, LX_FULL, "only under --rw") \
	X(chmod, LX_FULL, "only under --rw") \
	X(fchmod, LX_FULL, "only under --rw") \
	X(fchmodat, LX_FULL, "only under --rw") \
	X(umask, LX_FULL, "") \
	X(ftruncate, LX_FULL, "a memfd another process maps past the new length: EBUSY") \
	X(fsync, LX_FULL, "") \
	X(fdatasync, LX_FULL, "") \
	X(sync_file_range, LX_FULL, "") \
	X(fadvise64, LX_FULL, "") \
	X(fcntl, LX_PARTIAL, "descriptor and status flags, dup, pipe size, seals, POSIX and OFD " \
			     "locks; F_SETOWN accepted but no SIGIO is sent; leases and notify: EINVAL") \
	X(dup, LX_FULL, "") \
	X(dup2, LX_FULL, "") \
	X(dup3, LX_FULL, "") \
	X(pipe, LX_FULL, "") \
	X(pipe2, LX_FULL, "") \
	X(ioctl, LX_PARTIAL, "TCGETS, TCSETS*, TIOCGWINSZ, TIOCGPGRP, FIONREAD, FIONBIO, FIOCLEX, " \
			     "FIONCLEX; FIOASYNC accepted but no SIGIO is sent; others ENOTTY") \
	X(getdents64, LX_FULL, "") \
	X(mmap, LX_FULL, "MAP_SHARED mappings (anonymous or of a memfd) are shared between the " \
			 "processes that map them; files map as their host descriptors") \
	X(munmap, LX_FULL, "") \
	X(mprotect, LX_PARTIAL, "recorded, not enforced: page tables do not change at run time") \
	X(mremap, LX_PARTIAL, "MREMAP_MAYMOVE and MREMAP_FIXED; an old size of 0 (a duplicate): " \
			      "EINVAL") \
	X(madvise, LX_PARTIAL, "MADV_DONTNEED discards; the other known advice is accepted and " \
			       "has no effect") \
	X(brk, LX_FULL, "") \
	X(memfd_create, LX_PARTIAL, "no MFD_HUGETLB (EINVAL)") \
	X(arch_prctl, LX_PARTIAL, "ARCH_SET_FS, ARCH_GET_FS, ARCH_SET_GS, ARCH_GET_GS") \
	X(set_tid_address, LX_FULL, "") \
	X(set_robust_list, LX_FULL, "") \
	X(get_robust_list, LX_PARTIAL, "the calling thread's own list only (ESRCH for another)") \
	X(rseq, LX_PARTIAL, "ENOSYS: glibc and musl then do without restartable sequences") \
	X(prlimit64, LX_FULL, "the guest's own limits, never the monitor's; the caller's process " \
			      "only") \
	X(getrlimit, LX_FULL, "as prlimit64") \
	X(setrlimit, LX_FULL, "as prlimit64") \
	X(uname, LX_FULL, "the host's") \
	X(sysinfo, LX_PARTIAL, "memory figures are the VM's, the rest the host's") \
	X(times, LX_PARTIAL, "the monitor's times: the VM's processes counted together") \
	X(getrusage, LX_PARTIAL, "the monitor's usage; RUSAGE_THREAD reads as RUSAGE_SELF") \
	X(getpid, LX_FULL, "") \
	X(gettid, LX_FULL, "") \
	X(getppid, LX_FULL, "the first process's parent is ccvm's") \
	X(getuid, LX_FULL, "the user who started ccvm") \
	X(geteuid, LX_FULL, "as getuid") \
	X(getgid, LX_FULL, "as getuid") \
	X(getegid, LX_FULL, "as getuid") \
	X(getgroups, LX_FULL, "") \
	X(setuid, LX_PARTIAL, "only to the ids the guest has; any other EPERM") \
	X(setgid, LX_PARTIAL, "as setuid") \
	X(setresuid, LX_PARTIAL, "as setuid") \
	X(setresgid, LX_PARTIAL, "as setuid") \
	X(setgroups, LX_PARTIAL, "only to the groups the monitor has, or none") \
	X(getpgrp, LX_FULL, "") \
	X(getpgid, LX_FULL, "") \
	X(getsid, LX_FULL, "") \
	X(setpgid, LX_FULL, "") \
	X(setsid, LX_FULL, "") \
	X(sched_getaffinity, LX_FULL, "") \
	X(sched_setaffinity, LX_PARTIAL, "accepted and without effect: vCPUs are not pinned") \
	X(sched_yield, LX_FULL, "") \
	X(getcpu, LX_PARTIAL, "always CPU 0 on node 0") \
	X(prctl, LX_PARTIAL, "PR_SET_NAME, PR_GET_NAME, PR_SET_DUMPABLE, PR_GET_DUMPABLE; " \
			     "the rest EINVAL") \
	X(clock_gettime, LX_FULL, "the guest's clocks, carried on by a restore from the snapshot " \
				  "instant") \
	X(gettimeofday, LX_FULL, "as clock_gettime") \
	X(time, LX_FULL, "as clock_gettime") \
	X(clock_getres, LX_FULL, "") \
	X(nanosleep, LX_FULL, "") \
	X(clock_nanosleep, LX_FULL, "") \
	X(getrandom, LX_FULL, "") \
	X(rt_sigaction, LX_FULL, "") \
	X(rt_sigprocmask, LX_FULL, "") \
	X(rt_sigreturn, LX_FULL, "") \
	X(rt_sigpending, LX_FULL, "") \
	X(rt_sigsuspend, LX_FULL, "") \
	X(rt_sigtimedwait, LX_FULL, "") \
	X(rt_sigqueueinfo, LX_FULL, "") \
	X(rt_tgsigqueueinfo, LX_FULL, "") \
	X(sigaltstack, LX_FULL, "") \
	X(pause, LX_FULL, "") \
	X(kill, LX_FULL, "the VM's processes only") \
	X(tgkill, LX_FULL, "") \
	X(tkill, LX_FULL, "") \
	X(signalfd, LX_FULL, "") \
	X(signalfd4, LX_FULL, "") \
	X(alarm, LX_FULL, "") \
	X(setitimer, LX_PARTIAL, "ITIMER_REAL; arming ITIMER_VIRTUAL or ITIMER_PROF: ENOSYS") \
	X(getitimer, LX_PARTIAL, "as setitimer") \
	X(timer_create, LX_PARTIAL, "SIGEV_SIGNAL, SIGEV_NONE, SIGEV_THREAD_ID; an interval under " \
				    "1 ms fires once a millisecond, the rest as overruns") \
	X(timer_settime, LX_FULL, "") \
	X(timer_gettime, LX_FULL, "") \
	X(timer_getoverrun, LX_FULL, "") \
	X(timer_delete, LX_FULL, "") \
	X(timerfd_create, LX_FULL, "") \
	X(timerfd_settime, LX_FULL, "") \
	X(timerfd_gettime, LX_FULL, "") \
	X(futex, LX_PARTIAL, "the host's futex on the same word; priority-inheritance operations: " \
			     "ENOSYS") \
	X(clone, LX_PARTIAL, "threads as pthread_create makes them, CLONE_VM|CLONE_VFORK children " \
			     "and fork-like clones; a shared table or directory without shared " \
			     "memory: ENOSYS") \
	X(clone3, LX_PARTIAL, "as clone") \
	X(fork, LX_FULL, "memory shared copy-on-write, 2 MiB at a time") \
	X(vfork, LX_FULL, "") \
	X(execve, LX_PARTIAL, "with one thread in the process; with more: EAGAIN") \
	X(exit, LX_FULL, "") \
	X(exit_group, LX_FULL, "") \
	X(wait4, LX_FULL, "") \
	X(waitid, LX_FULL, "") \
	X(poll, LX_FULL, "") \
	X(ppoll, LX_FULL, "") \
	X(select, LX_FULL, "") \
	X(pselect6, LX_FULL, "") \
	X(epoll_create, LX_FULL, "") \
	X(epoll_create1, LX_FULL, "") \
	X(epoll_ctl, LX_FULL, "") \
	X(epoll_wait, LX_FULL, "") \
	X(epoll_pwait, LX_FULL, "") \
	X(eventfd, LX_FULL, "") \
	X(eventfd2, LX_FULL, "") \
	X(socket, LX_PARTIAL, "AF_INET, AF_INET6 and AF_UNIX; TCP, UDP and Unix sockets") \
	X(socketpair, LX_FULL, "") \
	X(bind, LX_FULL, "IP: published ports only (any with --net container); Unix: under " \
			 "--rw, no abstract names") \
	X(listen, LX_FULL, "") \
	X(accept, LX_FULL, "") \
	X(accept4, LX_FULL, "") \
	X(connect, LX_FULL, "loopback unless --net host or container; a Unix socket under " \
			    "--rw or named by --allow-unix, never another ccvm's") \
	X(shutdown, LX_FULL, "") \
	X(getsockname, LX_FULL, "ports as the guest knows them") \
	X(getpeername, LX_FULL, "as getsockname") \
	X(setsockopt, LX_FULL, "") \
	X(getsockopt, LX_FULL, "") \
	X(sendto, LX_FULL, "destinations as connect") \
	X(recvfrom, LX_FULL, "") \
	X(sendmsg, LX_PARTIAL, "SCM_RIGHTS passes descriptors; other control messages: EOPNOTSUPP") \
	X(recvmsg, LX_FULL, "SCM_RIGHTS descriptors join the table; other control messages " \
			    "pass as the host gives them")

#endif
