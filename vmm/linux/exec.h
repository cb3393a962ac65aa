/*
 * exec.h - execve (exec.c): a process's program replaced.
 */
#ifndef CCVM_LX_EXEC_H
#define CCVM_LX_EXEC_H

#include "call.h"

/* execve (exec.c): the program and its argument and environment strings read once,
 * the new image loaded over the calling process; returns only on failure (-errno). */
int64_t lx_execve(struct lx_call *c);

#endif
