/*
 * fdtable.h - a process's descriptor table: guest numbers to host descriptors, with
 * each one's flags and origin, and the holds that keep a host descriptor open while a
 * call uses it (fdtable.c). The table has its own lock, p->fdt.lock, which each
 * function takes itself; a caller that holds p->lock as well took it first.
 */
#ifndef CCVM_LX_FDTABLE_H
#define CCVM_LX_FDTABLE_H

#include "call.h"

int lx_fd_host(struct lx_proc *p, int fd);       /* host fd, or -EBADF */
int lx_fd_install(struct lx_proc *p, int host_fd, int min_fd, bool cloexec); /* guest fd or -EMFILE */
int lx_fd_close(struct lx_proc *p, int fd);
int lx_fd_install_at(struct lx_proc *p, int host_fd, int fd, bool cloexec);
int lx_fd_set_origin(struct lx_proc *p, int fd, const char *path, int oflags, int std);
/* A duplicate describes the same open file: @to inherits where @from came from. Guest
 * fd @fd's close-on-exec flag: set (@set 0 or 1) and returned, or only returned (@set
 * -1); -EBADF. The descriptors in [first, last] closed, or only marked close-on-exec;
 * those marked close-on-exec closed (execve). */
void lx_fd_copy_origin(struct lx_proc *p, int from, int to);
int lx_fd_cloexec(struct lx_proc *p, int fd, int set);
void lx_fd_close_range(struct lx_proc *p, int first, int last, bool cloexec_only);
void lx_fd_close_on_exec(struct lx_proc *p);
/* For code that walks p->fdt.files itself (a snapshot's save, the socket probes): the
 * table held still meanwhile. */
void lx_fd_lock(struct lx_proc *p);
void lx_fd_unlock(struct lx_proc *p);
int lx_fd_init(struct lx_proc *p);
int lx_fd_init_empty(struct lx_proc *p);
void lx_fd_fini(struct lx_proc *p);
/* fork's table: every descriptor of @parent duplicated into @child by @dup (which
 * makes a signalfd the child's own: signalfd.c), so parent and child share each open
 * file as on Linux. 0 or -errno. */
typedef int (*lx_fd_dup_fn)(struct lx_proc *parent, int host, struct lx_proc *child,
			    int *out);
int lx_fd_fork(struct lx_proc *parent, struct lx_proc *child, lx_fd_dup_fn dup);

/* For a call: guest fd -> host fd (-EBADF; -ENOMEM), held open until the system call
 * returns (lx_call_release, which lx_syscall calls, lets go): a guest close (or dup2
 * over it) meanwhile defers the host close to the last user, so the number cannot be
 * reused for another file under the call, as Linux keeps a file open for a call in
 * progress. A new host descriptor into the guest's table (closed on failure); both
 * ends of a pipe or socket pair, their numbers into @fds (guest memory; on failure
 * neither stays open). */
int lx_host_fd(struct lx_call *c, uint64_t fd);
void lx_call_release(struct lx_call *c);
int lx_install(struct lx_call *c, int host, int min_fd, bool cloexec);
int lx_install_pair(struct lx_call *c, int host[2], bool cloexec, int *fds);

#endif
