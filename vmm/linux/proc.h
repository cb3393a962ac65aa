/*
 * proc.h - a process as an object (proc.c): built blank, its program image checked and
 * loaded, its mapped files closed, freed.
 */
#ifndef CCVM_LX_PROC_H
#define CCVM_LX_PROC_H

#include "lx.h"

/* A process with nothing in it yet (proc.c): its lock, its signal state, its timers and
 * the watches that tie them, empty tables; 0 or -errno. lx_proc_free frees one that is
 * in no tree (lx_proc_destroy takes it out of its tree first). */
int lx_proc_blank(struct lx_proc **out);
void lx_proc_free(struct lx_proc *p);
/* A program image (proc.c). lx_image_check: would the program behind @fd (and its
 * interpreter) load, as far as can be told without touching memory? 0, -ENOEXEC,
 * -EACCES, -ENOENT. lx_image_load: load it into @p's memory, which holds nothing (a new
 * process, or one whose execve let go of its memory), with the stack @cfg describes;
 * @p->exe names it. 0 with @entry filled, or -errno. */
int lx_image_check(struct lx_proc *p, const struct lx_config *cfg, int fd);
int lx_image_load(struct lx_proc *p, const struct lx_config *cfg, int fd, struct lx_entry *entry);
/* The host descriptors of files the program mapped, closed and forgotten (proc.c), as
 * its end or an execve leaves them. */
void lx_mfiles_close(struct lx_proc *p);

#endif
