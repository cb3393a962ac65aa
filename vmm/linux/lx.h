/*
 * lx.h - the Linux personality: what the monitor offers a guest program instead of a
 * kernel. Process creation (ELF, stack, vDSO), the system-call entry point, and the
 * state a snapshot will need (files, memory map, signal dispositions).
 */
#ifndef CCVM_LX_H
#define CCVM_LX_H

#include "../../mmu/gmem.h"
#include "../../mmu/vma.h"
#include "net.h"

#include "../../base/x86.h"
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#define LX_NR_SYSCALLS 512
#define LX_NSIG        64
#define LX_MAX_FDS     65536
#define LX_MAX_THREADS 64    /* threads at once: as many as a VM has vCPUs */
#define LX_SIGQUEUE_MAX 32   /* signals queued per thread and per process */
#define LX_MAX_TIMERS  32    /* POSIX timers (timer_create) per process */
#define LX_MAX_SIGFDS  16    /* signalfds per process */
#define LX_MAX_PROCS   64    /* processes in one VM, ended ones not yet waited for too */

struct vdso_data;
struct lx_clone;
struct lx_proc;
struct lx_fastio;

/* What the personality needs from the VM: around host calls that may block, before
 * it discards guest memory (a snapshot in progress may still owe those pages to its
 * image), and a new vCPU for a new guest thread (0, or -EAGAIN past the thread cap). */
struct lx_hooks {
	void (*wait_begin)(void *vcpu);
	void (*wait_end)(void *vcpu);
	void (*before_discard)(void *ctx, uint64_t gpa, uint64_t len);
	int (*thread_create)(void *parent_vcpu, const struct lx_clone *cl);
	/* A new process, @child (lx_proc_fork's, made for vfork): its first thread,
	 * @cl->thread, starts on a vCPU of its own with @cl's registers, in the memory of
	 * the parent, whose vCPU is @parent_vcpu. 0 or -EAGAIN. And memory of its own for
	 * process @p, which shared its parent's until its execve: p->mem becomes the view
	 * of a new window, and the calling vCPU @vcpu runs over it from the call's return.
	 * 0 or -errno (-EAGAIN: no window free). NULL: processes are not offered. */
	int (*process_create)(void *parent_vcpu, const struct lx_clone *cl, struct lx_proc *child);
	int (*process_space)(void *vcpu, struct lx_proc *p);
	/* fork: @child (lx_proc_fork's) gets memory of its own that shares the parent's
	 * copy-on-write, child->mem its view; lx_fork_memory prepares it; its first thread
	 * starts as process_create's does. 0 or -errno (-EAGAIN: no window free), with
	 * nothing left of the child's memory. */
	int (*process_fork)(void *parent_vcpu, const struct lx_clone *cl, struct lx_proc *child);
	/* An execve in a process whose memory is shared with another's (after a fork):
	 * its memory starts over empty, what others read of it handed to them first
	 * (cheaper than copying each shared block to discard it); or, for the first
	 * process, left to the discard that follows. 0 or -errno. */
	int (*process_reset)(void *vcpu, struct lx_proc *p);
	/* The calling vCPU's FPU and vector registers in the standard (non-compacted)
	 * XSAVE format, as the platform gives them: the size in use (at most @cap), and
	 * the XSAVE features enabled in *@xfeatures; or -errno. And loading such an area
	 * back: 0, or -errno when the CPU refuses it. Signal handlers run only when both
	 * are given: a signal frame must save and restore that state (signal.c). */
	int (*fpu_save)(void *vcpu, void *buf, size_t cap, uint64_t *xfeatures);
	int (*fpu_load)(void *vcpu, const void *buf, size_t len);
	/* Make thread @vcpu look at its signals now: interrupt the host call it blocks
	 * in (EINTR) or bring its running vCPU out to the monitor. */
	void (*signal_kick)(void *vcpu);
	void *ctx;
};

struct lx_filter;

/* Resource limits a VM's first process starts with instead of the monitor's own (bit r
 * of @set: rlim[r] given). They are the guest's alone: the monitor's are never set. */
struct lx_rlimits {
	struct rlimit rlim[RLIM_NLIMITS];
	uint32_t set;
};

struct lx_config {
	const char *program;     /* as the user named it: resolved in the guest's root */
	int argc;
	char *const *argv;       /* argv[0] is what the program sees as its name */
	char *const *envp;
	const char *root;        /* host directory that is the guest's "/" */
	const char *const *rw;   /* host directories the guest may write under */
	int n_rw;
	const struct lx_net *net;  /* published ports and outgoing policy; NULL: none */
	const struct lx_hooks *hooks;
	const struct lx_filter *filter; /* a seccomp profile for the guest's calls; NULL: none */
	bool fastio;             /* preload the exitless socket path into dynamic glibc programs */
	const struct lx_rlimits *rlimits; /* NULL: the monitor's own */
	/* Signals ignored from the start (bit sig - 1), as exec leaves those its caller
	 * ignored: lx_sig_inherited() read before ccvm changed any for itself. */
	uint64_t ignored_signals;
	bool quiet;              /* a guest's execve: why it fails is the guest's errno,
				  * logged at debug level only */
};

struct lx_file {
	int host_fd;             /* -1: the slot is free */
	bool cloexec;
	int std;                 /* 0..2: the caller's stdin/stdout/stderr; -1 otherwise */
	int oflags;              /* open flags, for reopening on restore */
	char *path;              /* guest path it was opened by, NULL for pipes and std */
};

/* A process's paths (path.c). The root and the writable directories are set when it
 * is made and never change; the working directory and the umask change while other
 * threads' calls read them, under the object's own lock (a leaf), through path.h's
 * lx_fs_cwd and lx_fs_umask and their setters. */
struct lx_fs {
	int root_fd;             /* O_PATH descriptor of the root directory */
	char root_real[PATH_MAX];
	char **rw_real;          /* canonical host paths of the writable directories */
	int n_rw;
	pthread_mutex_t lock;    /* cwd and umask */
	bool lock_ready;         /* lock initialized (lx_fs_init, lx_fs_copy) */
	char cwd[PATH_MAX];      /* guest path of the working directory (lock) */
	mode_t umask;            /* (lock) */
};

struct lx_mm {
	struct vma_map map;
	uint64_t brk_start;      /* first byte of the heap */
	uint64_t brk;            /* current program break */
	uint64_t mmap_top;       /* mmap hands out addresses below this */
	uint64_t stack_lo, stack_top;
	uint64_t vdso_base;      /* the vDSO image; its data page is one page below */
};

struct lx_clock {
	struct vdso_data *data;  /* host pointer to the data page in guest memory */
	const struct vdso_counters *counters; /* and to the counter page (the guest writes it) */
	int64_t tsc_offset;      /* guest TSC - host TSC */
	uint64_t mult;
	uint32_t shift;
	uint64_t tsc_base;       /* guest TSC at mono_base_ns */
	uint64_t mono_base_ns;
};

struct lx_sigaction {
	uint64_t handler, flags, restorer, mask;
};

/* Signals waiting for delivery, in the order sent: a standard signal once, a
 * real-time one (32 and up) as often as it was sent, up to LX_SIGQUEUE_MAX. */
struct lx_sigqueue {
	uint64_t set;            /* bit sig - 1: at least one of them queued */
	int n;
	siginfo_t q[LX_SIGQUEUE_MAX];
};

/* A live thread, by id, with the signals sent to it alone (tgkill): kept in the
 * process, where a sender finds it whichever vCPU runs the thread. */
struct lx_sigthread {
	int tid;                 /* 0: the slot is free */
	struct lx_thread *thread; /* bound at its first system call; NULL until then */
	struct lx_sigqueue pend;
};

/* A timer that ends in a signal: a POSIX timer, or the process' ITIMER_REAL (alarm). */
struct lx_timer {
	bool used, armed;
	int clock;               /* the guest clock its times are on */
	int notify;              /* SIGEV_SIGNAL, SIGEV_NONE or SIGEV_THREAD_ID */
	int signo, tid;          /* the signal, and the thread for SIGEV_THREAD_ID */
	uint64_t value;          /* sigev_value, handed back in the siginfo */
	int64_t deadline;        /* next expiry, guest ns on @clock */
	int64_t interval;        /* period in ns; 0: once */
	int overrun;             /* of the signal last taken (timer_getoverrun) */
	bool parked;             /* periodic, its signal queued: re-armed when it is taken,
				  * as Linux does, so a pile-up costs nothing meanwhile */
};

/* A signalfd (signalfd.c): a host pipe whose read end the guest's descriptors are,
 * holding one byte while a signal of @mask is pending, so that poll and epoll on the
 * host see what Linux's signalfd would show; reads never reach the pipe. */
struct lx_sigfd {
	bool used;
	bool ready;              /* the byte is in the pipe */
	dev_t dev;               /* the pipe, as fstat of a guest descriptor shows it */
	ino_t ino;
	uint64_t mask;           /* the signals it reads, never KILL or STOP */
	int rd, wr;              /* the monitor's own ends */
};

/* The process' timers and the monitor thread that fires them (timer.c). */
struct lx_timers {
	struct lx_timer t[LX_MAX_TIMERS + 1]; /* the last one is ITIMER_REAL */
	pthread_cond_t cond;     /* with proc->lock: a timer changed, or stop */
	pthread_t thread;
	bool running, stop;
};

/* The processes of one VM (ptree.c): who is whose child, and the ids they get. */
struct lx_tree {
	pthread_mutex_t lock;    /* the relations below; taken before no process's lock */
	struct lx_proc *procs[LX_MAX_PROCS]; /* [0]: the first process, which adopts orphans */
	int max;                 /* --max-procs: fork fails with EAGAIN beyond it */
	bool cap_logged;         /* that it did, said once */
	int next_id;             /* the next pid or thread id, one space for both as on Linux */
};

struct lx_proc {
	struct gmem *mem;
	pthread_mutex_t lock;    /* guards fds, mm, fs and signal state */
	struct lx_fs fs;
	struct lx_net net;       /* what the guest's sockets may do (net.c) */
	/* The descriptor table (fdtable.c), under its own lock (fdt.lock): taken after
	 * p->lock where both are, never before it. */
	struct lx_fdtab {
		pthread_mutex_t lock;
		struct lx_file *files;
		int n_files;     /* slots allocated */
		uint32_t *holds; /* per host fd: system calls using it */
		int n_holds;     /* entries allocated */
	} fdt;
	struct lx_mm mm;
	int *mfiles;             /* host fds of files mapped with mmap (VMA_FILE file_id) */
	char **mfile_paths;      /* their guest paths (NULL if unknown), for restore */
	int n_mfiles;
	struct lx_clock clock;
	char exe[PATH_MAX];      /* guest path of the program (/proc/self/exe) */
	int pid;                 /* what the guest sees as its pid (kept across restore) */
	int next_tid;            /* the next thread's id */
	char comm[16];
	struct lx_sigaction sigact[LX_NSIG + 1];
	struct lx_sigqueue sigpend;                   /* sent to the process (kill) */
	struct lx_sigthread sigthr[LX_MAX_THREADS];
	pthread_cond_t sigcond;  /* with lock: a signal was queued (pause, sigsuspend...) */
	bool sig_rekick;         /* a blocked thread was kicked: the timer thread checks on it */
	/* What the signals tell the objects built on them, so signal.c never calls them
	 * (set by proc.c when it builds the process; each called with lock held): the
	 * pending signals changed (signalfds' readiness), a POSIX timer's signal was taken
	 * (its re-arm), a thread blocked in a host call was kicked (the timer thread
	 * watches that it left). */
	struct lx_sig_watch {
		void (*pending)(struct lx_proc *p);
		void (*timer_taken)(struct lx_proc *p, siginfo_t *info);
		void (*kicked)(struct lx_proc *p);
	} sigwatch;
	struct lx_timers timers;
	struct lx_sigfd sigfds[LX_MAX_SIGFDS];
	int n_sigfds;            /* of them used: 0 spares every read a look */
	struct rlimit rlim[RLIM_NLIMITS];
	const struct lx_hooks *hooks;
	const struct lx_filter *filter; /* a seccomp profile for the guest's calls; NULL: none */
	int exit_status;
	uint64_t sys_count[LX_NR_SYSCALLS];
	uint8_t sys_unknown_logged[LX_NR_SYSCALLS];
	struct lx_fastio *fio;   /* the exitless socket path, NULL when off */
	bool fastio_wanted;      /* --fastio: each program it execs gets the path too */
	/* Its place among the VM's processes (ptree.c; under tree->lock): */
	struct lx_tree *tree;    /* NULL: a process alone, as before trees existed */
	struct lx_proc *parent;  /* NULL for the first process */
	int ppid, pgid, sid;
	bool ended, released;    /* it exited (a zombie until waited for); its files closed */
	/* Started from outside the guest (ccvm-oci exec, lx_spawn_new): no parent in the
	 * VM, so nobody waits for it; it is reaped as it ends, its status the monitor's to
	 * report to whoever started it. */
	bool spawned;
	int wstatus;             /* once ended: the status wait4 reports */
	uint64_t child_events;   /* bumped when a child ends (atomic): wait4 wakes on it */
	/* vfork (ptree.c): the parent whose memory this process runs in until it execs or
	 * ends (NULL: none), and, in a parent, how many such children it waits for. */
	struct lx_proc *vfork_parent;
	int vfork_children;
	int term_sig;            /* the signal that ended it (0: it exited) */
	void *vm_space;          /* the VM's: this process's address space (NULL: the first's) */
	int vm_threads;          /* the VM's: threads of it running on vCPUs */
};

struct lx_thread {
	struct lx_proc *proc;
	int tid;
	void *vcpu;              /* handed back to the hooks */
	uint64_t clear_child_tid;
	uint64_t robust_list, robust_len;
	uint64_t sigmask;        /* changed by the thread itself, under proc->lock */
	uint64_t saved_mask;     /* rt_sigsuspend's: the mask to go back to */
	bool restore_mask;       /* saved_mask is to be restored as the call returns */
	bool sig_bound;          /* its lx_sigthread points here */
	struct lx_sigthread *sigslot; /* that slot, once bound (its queue, for a quick look) */
	bool in_wait;           /* in a host call that may block (lx_wait_begin) */
	const struct lx_fault *trap; /* the exception whose signal is being delivered */
	uint64_t altstack_sp, altstack_size;
	uint32_t altstack_flags;
	/* Set by a system call that gave the thread a whole new user context (a signal
	 * handler's entry, rt_sigreturn): resume with every register as in the regs,
	 * as IRET would, rather than as SYSRET (RIP from RCX, RFLAGS from R11). */
	bool resume_exact;
};

/* A new thread as clone asks for it: the registers it starts with (those of the
 * parent at its `syscall`, with rax 0 and its own stack), its TLS base, and its
 * personality state. The VM turns this into a running vCPU. */
struct lx_clone {
	struct cpu_regs regs;
	uint64_t fs_base, gs_base;
	struct lx_thread thread;
	uint64_t child_tid_at;   /* fork's CLONE_CHILD_SETTID: the pid there in the child's
				  * memory before it runs (0: nowhere) */
};

/* Where the first thread starts. */
struct lx_entry {
	uint64_t rip, rsp;
};

enum lx_action { LX_RESUME, LX_EXIT_THREAD, LX_EXIT_GROUP };

/*
 * lx_proc_create - resolve, validate and load the program into guest memory, with
 * its stack and the vDSO. Errors are reported to the user; the return value tells
 * the kind: -ENOENT (no such program), -ENOEXEC/-EACCES (cannot run it), others.
 */
int lx_proc_create(struct gmem *mem, const struct lx_config *cfg, struct lx_proc **out,
		   struct lx_entry *entry);
/* @p out of its tree, if in one, and freed (ptree.c). */
void lx_proc_destroy(struct lx_proc *p);
/* Its files, mappings' files and memory map let go of, as an exit does before the
 * parent waits; lx_proc_destroy then frees the rest. */
void lx_proc_release(struct lx_proc *p);

int lx_thread_init(struct lx_proc *p, struct lx_thread *t, void *vcpu);

/*
 * Processes (ptree.c). lx_tree_init makes @first the first of a VM's processes, with
 * the parent, group and session ccvm itself has; at most @max (1..LX_MAX_PROCS).
 * lx_proc_fork copies @parent as fork does: descriptors (the same open files), working
 * directory, umask, signal dispositions, memory map, limits; no pending signals, no
 * timers, a new pid; @out's memory is still the parent's until the VM gives it its own
 * address space. 0, -EAGAIN past --max-procs, -ENOMEM, -EMFILE.
 * lx_proc_ended: the process ended with wait status @wstatus; its children go to the
 * first process, its parent gets SIGCHLD and may wait for it. Unless the parent
 * ignores SIGCHLD, the process stays (a zombie) until waited for: after this call the
 * VM must not use @p again, whoever frees it.
 */
int lx_tree_init(struct lx_tree *t, struct lx_proc *first, int max);
/* Once no thread of the VM runs: frees every process but the first. */
void lx_tree_fini(struct lx_tree *t);
int lx_proc_fork(struct lx_proc *parent, struct lx_proc **out);
/* The process_fork hook's part in the child's new memory (ptree.c), before it runs:
 * the pid at @cl->child_tid_at, the vDSO clock page its own, the exitless socket path
 * off (its ring is the parent's). 0 or -EFAULT. */
int lx_fork_memory(struct lx_proc *child, const struct lx_clone *cl);
void lx_proc_ended(struct lx_proc *p, int wstatus);
/* A process started from outside the guest (ptree.c), as a container runtime's exec
 * starts one: what it gets from @init (the first process): root, writable
 * directories, network rules, limits, seccomp profile, clock; working directory @cwd
 * (a guest path, which must be a directory), descriptors 0, 1 and 2 copies of host
 * descriptors @fds, nothing else open; signal dispositions at their defaults; a new
 * pid in its own session and group, parent pid 0 as a process entering a container
 * from outside sees. Its memory is still @init's until the VM gives it an address
 * space, and lx_spawn_load (proc.c) then loads @cfg's program into it. 0, -EAGAIN
 * past --max-procs, -ENOENT or -ENOTDIR for @cwd, -ENOMEM, -EBADF. */
int lx_spawn_new(struct lx_proc *init, const char *cwd, const int fds[3], struct lx_proc **out);
int lx_spawn_load(struct lx_proc *p, const struct lx_config *cfg, struct lx_entry *entry);
/* @p leaves its tree (lx_proc_destroy does it). */
void lx_tree_forget(struct lx_proc *p);
/* A restored tree (ptree.c): process @q (lx_proc_restore's) joins @t where @at says,
 * a process that ended and was not waited for is made again from its status, and once
 * all are in, each finds its parent (the first process when its own is not there) and
 * new ids start past @next_id and every pid. 0, -EAGAIN past --max-procs, -EINVAL (a
 * pid taken or below 1). */
struct lx_tree_place {
	int pid, ppid, pgid, sid;
};
int lx_tree_restore_add(struct lx_tree *t, struct lx_proc *q, const struct lx_tree_place *at);
int lx_tree_restore_zombie(struct lx_tree *t, const struct lx_tree_place *at, int wstatus);
void lx_tree_restore_link(struct lx_tree *t, int next_id);
/* Processes in @t now, ended ones not yet waited for included. */
int lx_tree_count(struct lx_tree *t);
/* A new pid or thread id for a thread or child of @p. */
int lx_new_id(struct lx_proc *p);

/* Start the guest clock: the vDSO data page and the monitor's own clock syscalls
 * then agree. @tsc_offset is guest TSC - host TSC. */
void lx_clock_init(struct lx_proc *p, int64_t tsc_offset, uint32_t tsc_khz);
/* Find the vDSO's data and counter pages in guest memory (once the layout is known). */
void lx_clock_map(struct lx_proc *p);
/* How often the guest read the clock through the vDSO so far: a measure of its work
 * (vdso_abi.h). */
uint64_t lx_clock_reads(const struct lx_proc *p);
/* Re-read the realtime offset from the host (NTP may slew it); called periodically. */
void lx_clock_refresh(struct lx_proc *p);
/* lx_clock_refresh for every process of @first's tree, the first one included (ptree.c):
 * locks only tried, for the caller may hold locks a process's own calls take: a
 * process busy now is refreshed the next time. */
void lx_tree_clock_refresh(struct lx_proc *first);
/* A migration's switch, the VM paused (ptree.c): every TCP socket the tree listens on
 * stops listening but stays bound, so that the destination on this host can listen on
 * the same published port; their host descriptors into @fds (at most @max), how many
 * returned. lx_listeners_resume: they listen again (the migration failed). */
int lx_tree_listeners_stop(struct lx_proc *first, int *fds, int max);
void lx_listeners_resume(const int *fds, int n);
/* A post-copy's source once the destination runs (ptree.c): every connected TCP socket
 * of the tree shut down both ways, so that its peers see the connection end now and
 * reconnect (to the destination, where it publishes the port), not when the source's
 * push ends and it exits. How many. */
int lx_tree_conns_shutdown(struct lx_proc *first);

/*
 * lx_syscall - perform the system call described by @regs (number in rax, arguments
 * in rdi, rsi, rdx, r10, r8, r9) for thread @t; the result goes to regs->rax.
 * @segs may be changed (FS/GS base): then *segs_dirty is set. The thread resumes
 * as SYSRET would from @regs, or with @regs exactly when t->resume_exact is set (it
 * entered a signal handler or returned from one).
 */
enum lx_action lx_syscall(struct lx_thread *t, struct cpu_regs *regs, struct cpu_segs *segs,
			  bool *segs_dirty);

/* What a restore may give the guest: decided by the restoring command line and ccvm's
 * defaults, never by the image. The saved root must be @root (mapped files and paths
 * are re-read from it); the guest writes under @rw; the network policy is @net (its
 * host flag always; its rules when --publish was given, else the saved rules that bind
 * a loopback address). */
struct lx_restore_policy {
	const char *root;
	const char *const *rw;
	int n_rw;
	const struct lx_net *net;
	bool publish_given;
	const struct lx_hooks *hooks;
	const struct lx_filter *filter; /* a seccomp profile for the guest's calls; NULL: none */
	/* A tree's restore: the pipes made so far, by the inode they had ("ino" -> [read
	 * end, write end] host descriptors), so that the processes that shared one share
	 * the new one; NULL for one process. lx_restore_pipes_close closes them after. */
	struct json_t *pipes;
	/* The memfds an image holds (lx_shm_restore: "ino" -> host descriptor), which the
	 * processes' mappings and descriptors name by the inode they had; NULL: none. */
	struct json_t *shm;
};
void lx_restore_pipes_close(struct json_t *pipes);

/* Snapshots of shared memory (shm.c): every memfd the processes @procs map or hold
 * open, once each, as an image section (at most @max bytes: -E2BIG past it), taken
 * while they are paused and handed to @put as it is read (a record's head, then its
 * bytes a MiB at a time: never the whole section in memory); lx_shm_check refuses a
 * section ccvm could not have written (-EINVAL, why in @err); lx_shm_restore makes its
 * memfds again, into a registry that lx_shm_restored answers from (a new descriptor
 * of the memfd that had inode @ino, or -1) and lx_shm_restored_close closes. The _src
 * forms read the section through @src (@len bytes, @read of @n at @off: 0 or -errno),
 * as restore reads it from an image file. 0 or -errno. */
typedef int lx_shm_put_fn(void *ctx, const void *head, size_t head_len, const void *data,
			  size_t len);
struct lx_shm_src {
	uint64_t len;
	int (*read)(void *ctx, uint64_t off, void *buf, size_t n);
	void *ctx;
};
int lx_shm_save(struct lx_proc *const *procs, int n, size_t max, lx_shm_put_fn *put, void *ctx);
int lx_shm_check(const uint8_t *data, size_t len, char *err, size_t errlen);
int lx_shm_restore(const uint8_t *data, size_t len, struct json_t **reg);
int lx_shm_check_src(const struct lx_shm_src *src, char *err, size_t errlen);
int lx_shm_restore_src(const struct lx_shm_src *src, struct json_t **reg);
/* The same section arriving in pieces (a migration stream's), at most @max bytes:
 * each memfd made as its record's head comes and filled as its bytes do, so the
 * section is never held whole; lx_shm_in_end hands over the registry (NULL: no
 * memfds), or refuses a record cut short. Errors say why in @err. */
struct lx_shm_in {
	struct json_t *reg;
	uint8_t head[32 + 256];  /* the record's head (u64, u64, u32, u32) and padded name */
	size_t got;              /* of them so far */
	uint64_t done;           /* bytes of the memfd being filled */
	int fd;                  /* that memfd, or -1 between records */
	uint64_t total, max;
	int records;
};
void lx_shm_in_init(struct lx_shm_in *in, uint64_t max);
int lx_shm_in_put(struct lx_shm_in *in, const uint8_t *data, size_t len, char *err,
		  size_t errlen);
int lx_shm_in_end(struct lx_shm_in *in, struct json_t **reg, char *err, size_t errlen);
void lx_shm_in_free(struct lx_shm_in *in);
int lx_shm_restored(struct json_t *reg, uint64_t ino);
void lx_shm_restored_close(struct json_t *reg);

/* Snapshot support (state.c). lx_state_save describes the process and its @n threads
 * as JSON; lx_state_check refuses a saved state ccvm could not have written for RAM of
 * @ram_size bytes (-EINVAL, the field in @err; no VM needed); lx_proc_restore rebuilds
 * a process around memory already restored, under @pol, and lx_thread_restore its
 * thread number @i (0 .. lx_state_threads() - 1). */
struct json_t;
struct json_t *lx_state_save(struct lx_proc *p, struct lx_thread *const *threads, int n);
int lx_state_check(struct json_t *state, uint64_t ram_size, char *err, size_t errlen);
int lx_proc_restore(struct gmem *mem, struct json_t *state, const struct lx_restore_policy *pol,
		    struct lx_proc **out, char *err, size_t errlen);
int lx_state_threads(struct json_t *state);
int lx_thread_restore(struct lx_proc *p, struct json_t *state, int i, struct lx_thread *t);
/* Guest monotonic time now, and restarting the clock where a snapshot left it. */
uint64_t lx_clock_mono_ns(struct lx_proc *p);
void lx_clock_resume(struct lx_proc *p, int64_t tsc_offset, uint32_t tsc_khz, uint64_t mono_ns);
/* The POSIX timers and itimers a restore armed start counting, on the clock as it runs
 * now: after lx_clock_resume (timer.c). */
void lx_timer_start(struct lx_proc *p);

/* What the exitless socket path did (`ccvm ctl stats`). */
struct lx_fastio_stats {
	uint64_t enabled, sockets, accepted;
	uint64_t records, bytes_out, dropped;     /* written through the ring */
	uint64_t backlogs, lingered;              /* sockets that could not take a write at once */
	uint64_t prefetches, bytes_in;            /* read ahead into slots */
	uint64_t fast_reads, fast_writes;         /* guest calls that needed no exit */
};
void lx_fastio_get_stats(struct lx_proc *p, struct lx_fastio_stats *st);
uint64_t lx_fastio_gva(const struct lx_proc *p);
/* A fork's @child has a copy of @parent's area, whose ring only @parent's path serves:
 * the copy says the path is off, and the child's library makes system calls. 0 or
 * -EFAULT. */
int lx_fastio_fork(struct lx_proc *child, const struct lx_proc *parent);

/*
 * lx_sig_from_outside - signal @sig for the guest from outside it (`ccvm ctl kill`):
 * queued for the process as from a process it cannot see. Where signals are not
 * delivered, its default action is taken: returns 1 when that ends the process (the
 * VM stops with 128 + @sig), 0 when it was queued or does nothing; -EINVAL for a bad
 * number, -EAGAIN when the process' queue is full.
 */
int lx_sig_from_outside(struct lx_proc *p, int sig);
/* A thread kicked out of the program while it ran (not in a system call): has it
 * signals to take now? lx_sig_interrupt takes them with @regs the whole user context
 * (resume exactly as they are after); LX_EXIT_GROUP when one ended the process. */
bool lx_sig_waiting(struct lx_thread *t);
enum lx_action lx_sig_interrupt(struct lx_thread *t, struct cpu_regs *regs,
				struct cpu_segs *segs);

/* The signals this process ignores now (bit sig - 1), as its parent left them. */
uint64_t lx_sig_inherited(void);

/* A CPU exception the guest program caused, as the VM's exception stubs saw it; the
 * rest is the personality's to fill: whether a #PF's address is mapped (Linux tells
 * an access the mapping forbids from no mapping at all, not the error code: ccvm's
 * page tables may map what the program has not), the x87 control and status words
 * and MXCSR (#MF, #XM). */
struct lx_fault {
	int vector;
	uint64_t error_code;
	uint64_t cr2;            /* the faulting address of a #PF */
	bool mapped;             /* it lies in a mapping of the program (the personality's) */
	bool nomem;              /* a #PF the monitor could not back: past --mem-total */
	uint16_t fcw, fsw;
	uint32_t mxcsr;
};

/* The signal exception @vector ends a program with when nothing handles it. */
int lx_fault_signal(int vector);
/* The siginfo Linux gives for @f at @rip: 0, or -EAGAIN for a floating-point exception
 * with nothing unmasked raised (spurious: no signal). */
int lx_fault_info(const struct lx_fault *f, uint64_t rip, uint64_t rflags, siginfo_t *info);
/*
 * lx_fault - exception @f of thread @t, interrupted at user registers @regs: its
 * signal forced on the thread as Linux forces it. Returns true when the thread goes
 * on (in its handler, or where it was for a spurious one) with @regs exactly as they
 * are now; false when the default action applies: the VM reports the crash and ends
 * with 128 + lx_fault_signal().
 */
bool lx_fault(struct lx_thread *t, struct cpu_regs *regs, struct cpu_segs *segs,
	      const struct lx_fault *f);

/* Name of system call @nr ("syscall_N" when unknown); stable storage (call.c). */
const char *lx_syscall_name(unsigned nr);

#endif
