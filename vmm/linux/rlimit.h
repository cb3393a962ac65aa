/*
 * rlimit.h - resource limits by name (rlimit.c): the sixteen RLIMIT_* a guest's
 * limits may be given by on the command line and in an OCI config.
 */
#ifndef CCVM_LX_RLIMIT_H
#define CCVM_LX_RLIMIT_H

#include "lx.h"

/* "RLIMIT_NOFILE" or "nofile" (any case): its number, or -EINVAL. */
int lx_rlimit_by_name(const char *name);
/* "RLIMIT_NOFILE" for RLIMIT_NOFILE; NULL out of range. */
const char *lx_rlimit_name(int resource);
/*
 * lx_rlimit_parse - "NAME=SOFT[:HARD]" into @lims (HARD defaults to SOFT; each a
 * decimal number or "unlimited"; SOFT above HARD is refused, as setrlimit refuses it).
 * Returns 0, or -EINVAL with the reason in @err.
 */
int lx_rlimit_parse(const char *arg, struct lx_rlimits *lims, char *err, size_t len);

#endif
