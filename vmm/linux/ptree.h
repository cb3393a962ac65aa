/*
 * ptree.h - the processes of a VM as a tree (ptree.c): fork, vfork, kill to others, and
 * the slots and statuses the calls on it (sys_proc.c) use.
 */
#ifndef CCVM_LX_PTREE_H
#define CCVM_LX_PTREE_H

#include "call.h"

/* A free slot of tree @t for a new process, or -EAGAIN past --max-procs (tree->lock
 * held; ptree.c). */
int lx_tree_slot(struct lx_tree *t);
/* @p out of tree @t (tree->lock held); the siginfo of SIGCHLD and waitid for child
 * @pid that ended with @wstatus. */
void lx_tree_unlink(struct lx_tree *t, struct lx_proc *p);
siginfo_t lx_tree_child_info(int pid, int wstatus);

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

#endif
