/*
 * mm.h - a process's memory map as process setup uses it (sys_mm.c, whose calls keep it).
 */
#ifndef CCVM_LX_MM_H
#define CCVM_LX_MM_H

#include "lx.h"

/* Memory (sys_mm.c): used by process setup too. */
int lx_mm_discard(struct lx_proc *p, uint64_t start, uint64_t end);

#endif
