/*
 * sys.h - internal to the Linux personality: the handlers' type, the helpers for file
 * descriptors and the objects the handlers share (the call itself, its guest pointers
 * and the brackets around a wait: call.h), and the handlers themselves (grouped by
 * file: sys_file.c, sys_mm.c, sys_misc.c, sys_thread.c, sys_futex.c, sys_net.c,
 * sys_poll.c).
 */
#ifndef CCVM_LX_SYS_H
#define CCVM_LX_SYS_H

#include "call.h"
#include "fastio.h"
#include "fdtable.h"
#include "lx.h"
#include "systab.h"

typedef int64_t (*lx_handler)(struct lx_call *c);

/* A process with nothing in it yet (proc.c): its lock, its signal state, its timers and
 * the watches that tie them, empty tables; 0 or -errno. lx_proc_free frees one that is
 * in no tree (lx_proc_destroy takes it out of its tree first). */
int lx_proc_blank(struct lx_proc **out);
void lx_proc_free(struct lx_proc *p);
/* execve (exec.c): the program and its argument and environment strings read once,
 * the new image loaded over the calling process; returns only on failure (-errno). */
int64_t lx_execve(struct lx_call *c);
/* A free slot of tree @t for a new process, or -EAGAIN past --max-procs (tree->lock
 * held; ptree.c). */
int lx_tree_slot(struct lx_tree *t);
/* @p out of tree @t (tree->lock held); the siginfo of SIGCHLD and waitid for child
 * @pid that ended with @wstatus. */
void lx_tree_unlink(struct lx_tree *t, struct lx_proc *p);
siginfo_t lx_tree_child_info(int pid, int wstatus);

/* A program image (proc.c). lx_image_check: would the program behind @fd (and its
 * interpreter) load, as far as can be told without touching memory? 0, -ENOEXEC,
 * -EACCES, -ENOENT. lx_image_load: load it into @p's memory, which holds nothing (a new
 * process, or one whose execve let go of its memory), with the stack @cfg describes;
 * @p->exe names it. 0 with @entry filled, or -errno. */
int lx_image_check(struct lx_proc *p, const struct lx_config *cfg, int fd);
/* The clock into a new vDSO data page, as after execve (clock.c). */
void lx_clock_publish(struct lx_proc *p);
/* The host descriptors of files the program mapped, closed and forgotten (proc.c), as
 * its end or an execve leaves them. */
void lx_mfiles_close(struct lx_proc *p);
/*
 * Shared mappings (shm.c). lx_shm_lock orders shared mappings against truncations of
 * the memfds behind them, for the whole VM: taken before any process's lock.
 * lx_shm_anon: a memfd of ccvm's own of @len bytes for MAP_SHARED | MAP_ANONYMOUS (a
 * host fd, or -errno). lx_shm_alias: [start, end) of @p's memory becomes @host's bytes
 * from @off on, as far as the file goes (p->lock held). lx_shm_drop: the shared
 * mappings in [start, end) become private zero memory again, before they leave the map
 * (p->lock held). lx_shm_map_all: every shared mapping of @p's map made (a fork's
 * child, a restored process). lx_shm_may_truncate: 0, or -EBUSY when a process maps
 * memfd @host past @len. 0 or -errno.
 */
void lx_shm_lock(void);
void lx_shm_unlock(void);
bool lx_shm_is_memfd(int host);
int lx_shm_anon(uint64_t len);
int lx_shm_alias(struct lx_proc *p, uint64_t start, uint64_t end, int host, uint64_t off);
int lx_shm_drop(struct lx_proc *p, uint64_t start, uint64_t end);
int lx_shm_map_all(struct lx_proc *p);
int lx_shm_may_truncate(struct lx_proc *p, int host, uint64_t len);
/* The inode of memfd @host into *@ino: true, or false when it is not a memfd. */
bool lx_shm_memfd_ino(int host, uint64_t *ino);
/* execve's end of the POSIX timers (timer.c). */
void lx_timer_exec(struct lx_proc *p);
int lx_image_load(struct lx_proc *p, const struct lx_config *cfg, int fd, struct lx_entry *entry);

/* vfork and clone(CLONE_VM | CLONE_VFORK) (ptree.c): the child's pid, once it execs or
 * ends; or -errno. The child runs on @stack (0: the parent's, as vfork), and its pid
 * is stored at @tid_at (CLONE_PARENT_SETTID; 0: nowhere) before it runs. */
int64_t lx_vfork(struct lx_call *c, uint64_t stack, uint64_t tid_at);
/* fork, and clone without CLONE_VM (ptree.c): the child's pid, or -errno. The child
 * runs on @req's stack (0: the parent's), with its TLS (CLONE_SETTLS), its pid stored
 * where CLONE_PARENT_SETTID and CLONE_CHILD_SETTID ask, its tid word cleared at exit
 * (CLONE_CHILD_CLEARTID). */
struct lx_fork_req {
	uint64_t flags, stack, parent_tid, child_tid, tls;
};
int64_t lx_fork(struct lx_call *c, const struct lx_fork_req *req);
/* A vfork child no longer runs in its parent's memory (it execs, or ends): the parent
 * goes on. */
void lx_vfork_release(struct lx_proc *child);
/* kill(2) to other processes of @p's VM (ptree.c): @pid > 0 one, 0 @p's group, -1 all
 * but the first, < -1 group -@pid. Returns 1 when @p itself is among them (the caller
 * sends it its own last), 0, -ESRCH when none matched, -EINVAL. */
int lx_tree_kill(struct lx_proc *p, int pid, const siginfo_t *info);

/* Control messages (scm.c). lx_scm_out: the guest's control data of header @g copied
 * into @buf (room for LX_CMSG_MAX), SCM_RIGHTS descriptors made host ones; *@len its
 * length (0: none); 0 or -errno. lx_scm_in: the control data host header @m received
 * to the guest (@ucontrol, its length at @ulen_at), descriptors installed
 * (@cloexec: MSG_CMSG_CLOEXEC), MSG_CTRUNC into *@flags when the table was full. */
#define LX_CMSG_MAX 4096
struct msghdr;
int lx_scm_out(struct lx_call *c, const struct msghdr *g, uint8_t *buf, size_t *len);
int lx_scm_in(struct lx_call *c, struct msghdr *m, uint64_t ucontrol, uint64_t ulen_at,
	      bool cloexec, int *flags);

/* Descriptors in snapshots (fdstate.c); the caller holds p->lock to save. Restore
 * fails (-EADDRNOTAVAIL, message in @err) only when a listening socket cannot listen
 * again; other descriptors that cannot come back stay closed, with a log line. */
struct json_t;
struct json_t *lx_fdstate_save(struct lx_proc *p);
/* JSON numbers of the saved state (state.c): a u64 in, a member's u64 out (0 if absent). */
struct json_t *lx_j_u64(uint64_t v);
uint64_t lx_ju(struct json_t *o, const char *key);
int lx_fdstate_restore(struct lx_proc *p, struct json_t *fds, struct json_t *pipes,
		       struct json_t *shm, char *err, size_t errlen);
/* Refuse saved descriptors ccvm could not have given a guest (a raw socket...):
 * -EINVAL with the field in @err. */
int lx_fdstate_check(struct json_t *fds, char *err, size_t errlen);

/* Paths (path.c): confined to the guest root, writable only under --rw dirs. */
int lx_fs_init(struct lx_fs *fs, const char *root, const char *const *rw, int n_rw);
void lx_fs_fini(struct lx_fs *fs);
/* fork's copy: the same root, writable directories, working directory and umask. 0 or
 * -errno (@dst then holds what lx_fs_fini frees). */
int lx_fs_copy(struct lx_fs *dst, const struct lx_fs *src);
int lx_path_join(struct lx_proc *p, int dirfd, const char *path, char out[PATH_MAX]);
/* Open a guest path: checked on an O_PATH descriptor first, then opened for real, never
 * as a controlling tty. @c: the calling system call (a FIFO waits for its peer inside
 * its blocking bracket), or NULL outside a call (FIFOs then never wait). */
int lx_fs_open(struct lx_call *c, struct lx_fs *fs, const char *gpath, int flags, mode_t mode,
	       int *host_fd);
int lx_fs_open_path(struct lx_fs *fs, const char *gpath, bool follow, int *host_fd);
int lx_fs_parent(struct lx_fs *fs, const char *gpath, bool for_write, int *parent_fd,
		 char base[NAME_MAX + 1]);
int lx_fs_guest_path(struct lx_fs *fs, int host_fd, char out[PATH_MAX]);
/* May the guest write to what @host_fd is (harmless devices included)? Is it under
 * an --rw directory (what changing its metadata needs)? */
bool lx_fs_writable(struct lx_fs *fs, int host_fd);
bool lx_fs_in_rw(struct lx_fs *fs, int host_fd);
/* Is what @host_fd is exactly one of the host paths @paths (canonical)? */
bool lx_fs_is_one_of(int host_fd, const char *const *paths, int n);

/* Memory (sys_mm.c): used by process setup too. */
int lx_mm_discard(struct lx_proc *p, uint64_t start, uint64_t end);

/* Clocks (clock.c): the monitor's view of the guest clocks. */
int lx_clock_now(struct lx_proc *p, int clock, int64_t *ns);
/* Sleep the calling vCPU until guest clock @clock reads @deadline_ns (sys_misc.c). */
int lx_sleep_until(struct lx_call *c, int clock, int64_t deadline_ns, int64_t *left);
/* A thread's exit (sys_futex.c): zero its clear-tid word and wake a waiter; release
 * the robust locks it still held (its set_robust_list list) as OWNER_DIED. */
void lx_futex_clear_tid(struct lx_proc *p, uint64_t gva);
void lx_futex_exit_robust(struct lx_proc *p, uint64_t head_gva, int tid);

/* Signal numbers, sigaction flags and sigaltstack's, as the guest passes them. */
#define LX_SIG_BIT(s)      (1ULL << ((s) - 1))
#define LX_SIGSET_SIZE     8 /* the kernel's sigset_t, as calls pass its size */
#define LX_SIG_UNBLOCKABLE (LX_SIG_BIT(SIGKILL) | LX_SIG_BIT(SIGSTOP))
#define LX_SA_SIGINFO      0x00000004ULL
#define LX_SA_RESTORER     0x04000000ULL
#define LX_SA_ONSTACK      0x08000000ULL
#define LX_SA_RESTART      0x10000000ULL
#define LX_SA_NODEFER      0x40000000ULL
#define LX_SA_RESETHAND    0x80000000ULL
#define LX_SS_ONSTACK      1
#define LX_SS_DISABLE      2
#define LX_SS_AUTODISARM   (1U << 31)
#define LX_MINSIGSTKSZ     2048

/* Signals (signal.c). Delivery is on when the VM gives the fpu hooks; a thread is
 * known to senders from lx_sig_thread_add (-EAGAIN past LX_MAX_THREADS) until
 * lx_sig_thread_remove. lx_sig_send queues @info for the process (@tid 0) or one
 * thread (-ESRCH: no such thread, -EAGAIN: its queue is full); lx_sig_deliver runs
 * as a system call returns and points the thread at its handlers. */
bool lx_sig_on(const struct lx_proc *p);
/* A condition whose timed waits count on CLOCK_MONOTONIC: 0 or -errno. */
int lx_cond_init_monotonic(pthread_cond_t *cond);
int lx_sig_init(struct lx_proc *p);
void lx_sig_fini(struct lx_proc *p);
int lx_sig_thread_add(struct lx_proc *p, int tid);
void lx_sig_bind(struct lx_thread *t);
void lx_sig_thread_remove(struct lx_proc *p, int tid);
int lx_sig_send(struct lx_proc *p, int tid, const siginfo_t *info);
void lx_sig_deliver(struct lx_call *c);
/* A write that failed with @rc: EPIPE raises SIGPIPE in the writer (not for a send
 * with MSG_NOSIGNAL). */
void lx_sig_broken_pipe(struct lx_call *c, int64_t rc);
bool lx_sig_thread_known(struct lx_proc *p, int tid);
/* Timer @id (LX_MAX_TIMERS: ITIMER_REAL) expired after @missed periods went by
 * unnoticed: its signal queued, or its queued one's overrun grown (p->lock held). */
void lx_sig_queue_timer(struct lx_proc *p, int id, int64_t missed);
/* Whether POSIX timer @id's signal is queued, not yet taken (p->lock held). */
bool lx_sig_timer_pending(struct lx_proc *p, int id);
/* The guest takes @info, a POSIX timer's signal: a timer parked meanwhile is re-armed
 * after now, the periods it missed added to @info's overrun (p->lock held). */
void lx_timer_taken(struct lx_proc *p, siginfo_t *info);

/* What signal.c and sigframe.c share. The mask of a thread changes under the process
 * lock (senders read it); lx_sig_force raises a signal the kernel itself would (a bad
 * frame: SIGSEGV), @reset when its handler is what failed. lx_sig_user_regs: the
 * registers thread @t resumes with now (after a system call, RIP and RFLAGS as SYSRET
 * takes them). lx_sig_frame: the frame of @info for handler @act, the thread at user
 * registers @u, and c->regs at the handler; 0 or -EFAULT. */
void lx_sig_set_mask(struct lx_thread *t, uint64_t mask);
/* Does @sig's default action end the process? The signals @t lets in now; those of
 * @set pending for it (p->lock held). A kill-style siginfo from the guest's own
 * process. An exception's @info forced on @t as force_sig_fault does: 0, or -errno
 * when no queue takes it. */
bool lx_sig_kills(int sig);
uint64_t lx_sig_allowed(const struct lx_thread *t);
uint64_t lx_sig_pending(struct lx_thread *t, uint64_t set);
siginfo_t lx_sig_user_info(struct lx_call *c, int sig, int code);
int lx_sig_queue_fault(struct lx_thread *t, const siginfo_t *info);
/* rt_sigreturn's and sigaltstack's work (sigframe.c); signalfd's (signalfd.c): @fd -1
 * for a new one, else the one whose mask changes. */
int64_t lx_sig_return(struct lx_call *c);
int64_t lx_sig_altstack(struct lx_call *c);
int64_t lx_signalfd(struct lx_call *c, int64_t fd, uint64_t umask, uint64_t size,
		    uint64_t flags);
void lx_sig_force(struct lx_call *c, int sig, bool reset);
void lx_sig_user_regs(const struct lx_thread *t, const struct cpu_regs *r, struct cpu_regs *u);
int lx_sig_frame(struct lx_call *c, const struct lx_sigaction *act, const siginfo_t *info,
		 const struct cpu_regs *u);

/* The x87 control and status words and MXCSR of thread @t now: 0 or -errno. Forcing
 * exception @f's signal @info on @t (sigfault.c): true when a handler takes it. */
int lx_sig_fpu_words(struct lx_thread *t, uint16_t *fcw, uint16_t *fsw, uint32_t *mxcsr);
bool lx_sig_fault(struct lx_thread *t, struct cpu_regs *regs, struct cpu_segs *segs,
		  const siginfo_t *info, const struct lx_fault *f);

/* Timers (timer.c): made with the process' signal state, stopped with it. */
int lx_timer_init(struct lx_proc *p);
void lx_timer_fini(struct lx_proc *p);
/* Could this ccvm have made timer @t in slot @id (a saved state's)? Starting the
 * timers a restore armed, once the guest clock runs again. */
bool lx_timer_valid(int id, const struct lx_timer *t);
/* The clock id of host timerfd @host, or -EINVAL when it is not one (fdstate.c too). */
int lx_timerfd_clock(int host);
void lx_timer_start(struct lx_proc *p);
/* Wake the timer thread (starting it): it has threads to watch (p->lock held). */
void lx_timer_poke(struct lx_proc *p);

/* Linux's restart codes, which a blocking call returns when a signal the guest takes
 * interrupts it. The guest never sees them: lx_sig_deliver turns them into EINTR or
 * a call made again, as the handler's SA_RESTART and the call decide. */
#define LX_ERESTARTSYS           512 /* restarted under SA_RESTART, else EINTR */
#define LX_ERESTARTNOINTR        513 /* always restarted */
#define LX_ERESTARTNOHAND        514 /* EINTR when a handler ran */
#define LX_ERESTART_RESTARTBLOCK 516 /* EINTR when a handler ran (sleeps) */
/* A host call made for the guest came back with EINTR: -@restart when a signal the
 * thread takes is pending (the call ends with it), 0 when it was only the monitor's
 * own wake-up and the caller calls again. errno is kept. */
int lx_sig_eintr(struct lx_call *c, int restart);
bool lx_sig_restart_code(int64_t rc);
/* ppoll's and the like's @mask holds while the call waits: the thread's own comes
 * back as it returns. 0, or a restart code when a signal it lets in is pending. */
int lx_sig_wait_mask(struct lx_call *c, uint64_t mask);
/* A signal set argument of @size bytes at @uaddr, read once into *@set: 0, -EINVAL
 * for a size other than the kernel's, -EFAULT. */
int lx_sigset_in(struct lx_call *c, uint64_t uaddr, uint64_t size, uint64_t *set);
/* The next signal of @allowed thread @t may take (its own first, then the
 * process'): 0, or its number with *@info filled (p->lock held). */
int lx_sig_take(struct lx_thread *t, uint64_t allowed, siginfo_t *info);
/* Sleep until a signal of @set is pending for the calling thread, or host monotonic
 * time @until (NULL: no end). The vCPU counts as blocked meanwhile, so pauses and
 * snapshots go ahead. 0, or -EAGAIN at the end with none pending. */
int lx_sig_wait(struct lx_call *c, uint64_t set, const struct timespec *until);
/* Sleep, as blocked, until a signal the calling thread takes is pending (returns
 * -@restart) or *@events, bumped under no lock, differs from @seen (0). Whoever bumps
 * it broadcasts the process' sigcond under its lock afterwards. */
int lx_sig_wait_event(struct lx_call *c, const uint64_t *events, uint64_t seen, int restart);
/* Fork's copy of host descriptor @host of @parent, for @child (lx_fd_fork's dup): a
 * duplicate, or for a signalfd one of its own, on @child's signals; 0 with *@out the
 * new host end, or -errno (@parent's lock held). */
int lx_sigfd_fork_dup(struct lx_proc *parent, int host, struct lx_proc *child, int *out);

/* Signalfds (signalfd.c). lx_sigfd_sync: after any change to the pending signals,
 * each signalfd's readiness as its mask says (p->lock held). lx_sigfd_is: is host
 * descriptor @host a signalfd (its reads go to lx_sigfd_read, which takes signals
 * into @iov as struct signalfd_siginfo). lx_sigfd_mask: the mask of signalfd @host
 * and its pipe's inode (which its duplicates share), -EINVAL if it is none (p->lock
 * held).
 * lx_sigfd_create: a new one, *@host the guest's end; 0 or -errno. */
void lx_sigfd_sync(struct lx_proc *p);
bool lx_sigfd_is(struct lx_proc *p, int host);
bool lx_sigfd_is_locked(struct lx_proc *p, int host); /* p->lock held */
int64_t lx_sigfd_read(struct lx_call *c, int host, const struct iovec *iov, int cnt);
int lx_sigfd_mask(struct lx_proc *p, int host, uint64_t *mask, uint64_t *ino);
int lx_sigfd_create(struct lx_proc *p, uint64_t mask, int flags, int *host);
void lx_sigfd_fini(struct lx_proc *p);

/* The timer thread's watch over kicked threads: kick again those still blocked with
 * a signal to take (a kick can land just before the host call it was meant to end);
 * false once there are none (p->lock held). */
bool lx_sig_rekick(struct lx_proc *p);


#define LX_DECLARE(name, support, note) int64_t sys_##name(struct lx_call *c);
LX_SYSCALLS(LX_DECLARE)
#undef LX_DECLARE

#endif
