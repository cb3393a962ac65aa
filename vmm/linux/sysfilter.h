/*
 * sysfilter.h - a seccomp profile applied by the personality to the guest's own system
 * calls (sysfilter.c).
 */
#ifndef CCVM_LX_SYSFILTER_H
#define CCVM_LX_SYSFILTER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define LX_FILTER_MAX_RULES 8192
#define LX_FILTER_MAX_ARGS  6

/* In increasing precedence, as the kernel ranks seccomp's actions: where several rules
 * match a call, the highest wins. */
enum lx_filter_act {
	LX_FA_ALLOW,
	LX_FA_LOG,
	LX_FA_TRACE,  /* no tracer is ever attached: the call fails with ENOSYS */
	LX_FA_ERRNO,
	LX_FA_TRAP,   /* SIGSYS, which the guest may handle */
	LX_FA_KILL,   /* the process ends by SIGSYS (KILL, KILL_THREAD, KILL_PROCESS) */
};

struct lx_filter_cond {
	uint8_t index;           /* argument 0..5 */
	uint8_t op;              /* enum lx_filter_op (sysfilter.c) */
	uint64_t value, value2;  /* MASKED_EQ: (arg & value) == value2 */
};

struct lx_filter_rule {
	uint16_t nr;
	uint8_t act;
	uint8_t n_conds;         /* all must hold */
	int errno_ret;
	struct lx_filter_cond conds[LX_FILTER_MAX_ARGS];
};

struct lx_filter {
	uint8_t def_act;
	int def_errno;
	struct lx_filter_rule *rules; /* sorted by nr */
	size_t n_rules;
	uint32_t *first;         /* [nr]: the first rule of nr; [nr + 1] past its last */
	unsigned n_unknown;      /* names the profile gave that x86-64 has no call for */
};

/* What a call gets: its action, and the errno of ERRNO. */
struct lx_filter_verdict {
	enum lx_filter_act act;
	int err;
};

/*
 * lx_filter_parse - an OCI linux.seccomp object (runtime-spec config-linux.md: the
 * default action, architectures, flags, and syscalls with names, action, errnoRet and
 * args) into @f. Calls x86-64 does not have are skipped, as runc skips them. Two
 * conditions on the same argument make separate rules (either may hold), as runc
 * gives them to libseccomp.
 *
 * Returns 0, or -EINVAL/-ENOMEM with a message naming the field in @err.
 */
int lx_filter_parse(json_t *profile, struct lx_filter *f, char *err, size_t len);
void lx_filter_free(struct lx_filter *f);
/* The same from a file holding the object (at most 4 MiB). */
int lx_filter_load(const char *path, struct lx_filter *f, char *err, size_t len);
/* The verdict for call @nr with arguments @a. */
struct lx_filter_verdict lx_filter_check(const struct lx_filter *f, uint64_t nr, const uint64_t a[6]);
/* Is call @nr allowed whatever its arguments (no rule of it other than ALLOW, and the
 * default ALLOW when none matches)? Calls that bypass the monitor need this. */
int lx_filter_allows_all(const struct lx_filter *f, uint64_t nr);

#endif
