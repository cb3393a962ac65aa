/*
 * sysfilter.c - a seccomp profile applied by the personality to the guest's own calls.
 *
 * A container's config carries a seccomp profile (podman's and Docker's defaults
 * deny some fifty calls and some arguments of others). The guest's calls never reach
 * the host kernel as calls: every one exits to the monitor, so the monitor applies the
 * profile itself, before the handler, with the kernel's precedence between actions.
 * The monitor's own seccomp filter (vmm/confine_seccomp.c) is another thing: it bounds
 * the monitor. The profile is hostile input (it comes from a config file): every
 * field is checked, its size bounded, and a call name x86-64 lacks is skipped.
 */
#include "sysfilter.h"

#include "lx.h"
#include "syscall_names.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LX_FILTER_MAX_FILE (4u << 20)

enum lx_filter_op { OP_NE, OP_LT, OP_LE, OP_EQ, OP_GE, OP_GT, OP_MASKED_EQ };

static const char *const op_names[] = { "SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE",
					"SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT",
					"SCMP_CMP_MASKED_EQ" };

static const struct {
	const char *name;
	enum lx_filter_act act;
} act_names[] = {
	{ "SCMP_ACT_ALLOW", LX_FA_ALLOW },        { "SCMP_ACT_LOG", LX_FA_LOG },
	{ "SCMP_ACT_TRACE", LX_FA_TRACE },        { "SCMP_ACT_ERRNO", LX_FA_ERRNO },
	{ "SCMP_ACT_TRAP", LX_FA_TRAP },          { "SCMP_ACT_KILL", LX_FA_KILL },
	{ "SCMP_ACT_KILL_THREAD", LX_FA_KILL },   { "SCMP_ACT_KILL_PROCESS", LX_FA_KILL },
};

static const char *const known_flags[] = { "SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
					   "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
					   "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV" };

#define LX_NR_NAMES (sizeof(lx_syscall_names) / sizeof(lx_syscall_names[0]))

static int fl_err(char *err, size_t len, const char *field, const char *what)
{
	snprintf(err, len, "linux.seccomp%s: %s", field, what);
	return -EINVAL;
}

static int fl_action(json_t *v, const char *field, enum lx_filter_act *out, char *err, size_t len)
{
	const char *s = json_string_value(v);

	for (size_t i = 0; s && i < sizeof(act_names) / sizeof(act_names[0]); i++) {
		if (strcmp(s, act_names[i].name) == 0) {
			*out = act_names[i].act;
			return 0;
		}
	}
	if (s && strcmp(s, "SCMP_ACT_NOTIFY") == 0)
		return fl_err(err, len, field, "SCMP_ACT_NOTIFY needs a listener, which ccvm has not");
	return fl_err(err, len, field, "not a seccomp action (SCMP_ACT_ALLOW, ERRNO, KILL, "
		      "KILL_THREAD, KILL_PROCESS, TRAP, TRACE, LOG)");
}

/* errnoRet: an errno Linux has, EPERM when absent. */
static int fl_errno(json_t *v, const char *field, int *out, char *err, size_t len)
{
	if (!v || json_is_null(v)) {
		*out = EPERM;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4095)
		return fl_err(err, len, field, "errnoRet is an errno, 0..4095");
	*out = (int)json_integer_value(v);
	return 0;
}

static int fl_cond(json_t *a, struct lx_filter_cond *c, char *err, size_t len)
{
	json_t *idx = json_object_get(a, "index"), *val = json_object_get(a, "value");
	json_t *val2 = json_object_get(a, "valueTwo");
	const char *op = json_string_value(json_object_get(a, "op"));

	if (!json_is_integer(idx) || json_integer_value(idx) < 0 || json_integer_value(idx) > 5)
		return fl_err(err, len, ".syscalls[].args[].index", "an argument, 0..5");
	if (!json_is_integer(val) || (val2 && !json_is_integer(val2)))
		return fl_err(err, len, ".syscalls[].args[].value", "an integer");
	c->index = (uint8_t)json_integer_value(idx);
	c->value = (uint64_t)json_integer_value(val);
	c->value2 = val2 ? (uint64_t)json_integer_value(val2) : 0;
	for (size_t i = 0; op && i < sizeof(op_names) / sizeof(op_names[0]); i++) {
		if (strcmp(op, op_names[i]) == 0) {
			c->op = (uint8_t)i;
			return 0;
		}
	}
	return fl_err(err, len, ".syscalls[].args[].op", "not a SCMP_CMP_* comparison");
}

static int fl_push(struct lx_filter *f, const struct lx_filter_rule *r)
{
	if (f->n_rules >= LX_FILTER_MAX_RULES)
		return -E2BIG;
	if ((f->n_rules & 63) == 0) {
		struct lx_filter_rule *n = realloc(f->rules, (f->n_rules + 64) * sizeof(*n));

		if (!n)
			return -ENOMEM;
		f->rules = n;
	}
	f->rules[f->n_rules++] = *r;
	return 0;
}

/* Rules for call @nr from one entry: one with all conditions, or, when two name the
 * same argument, one per condition. */
static int fl_rules_for(struct lx_filter *f, uint16_t nr, const struct lx_filter_rule *tmpl,
			const struct lx_filter_cond *conds, size_t n)
{
	bool split = false;
	struct lx_filter_rule r = *tmpl;
	int rc;

	for (size_t i = 0; i < n; i++)
		for (size_t k = i + 1; k < n; k++)
			split |= conds[i].index == conds[k].index;
	r.nr = nr;
	if (!split) {
		memcpy(r.conds, conds, n * sizeof(*conds));
		r.n_conds = (uint8_t)n;
		return fl_push(f, &r);
	}
	for (size_t i = 0; i < n; i++) {
		r.conds[0] = conds[i];
		r.n_conds = 1;
		if ((rc = fl_push(f, &r)))
			return rc;
	}
	return 0;
}

static int fl_nr(const char *name)
{
	for (size_t nr = 0; nr < LX_NR_NAMES && nr < LX_NR_SYSCALLS; nr++)
		if (lx_syscall_names[nr] && strcmp(lx_syscall_names[nr], name) == 0)
			return (int)nr;
	return -1;
}

static int fl_entry(struct lx_filter *f, json_t *e, char *err, size_t len)
{
	struct lx_filter_cond conds[LX_FILTER_MAX_ARGS];
	struct lx_filter_rule tmpl = { 0 };
	json_t *names = json_object_get(e, "names"), *args = json_object_get(e, "args"), *v;
	enum lx_filter_act act;
	size_t i, n = json_array_size(args);
	int rc;

	if (!json_is_object(e) || !json_is_array(names))
		return fl_err(err, len, ".syscalls[]", "an entry needs names");
	if ((rc = fl_action(json_object_get(e, "action"), ".syscalls[].action", &act, err, len)) ||
	    (rc = fl_errno(json_object_get(e, "errnoRet"), ".syscalls[].errnoRet", &tmpl.errno_ret,
			   err, len)))
		return rc;
	tmpl.act = (uint8_t)act;
	if (args && !json_is_null(args) && !json_is_array(args))
		return fl_err(err, len, ".syscalls[].args", "an array");
	if (n > LX_FILTER_MAX_ARGS)
		return fl_err(err, len, ".syscalls[].args", "six conditions at most");
	json_array_foreach(args, i, v)
		if ((rc = fl_cond(v, &conds[i], err, len)))
			return rc;
	json_array_foreach(names, i, v) {
		int nr = json_is_string(v) ? fl_nr(json_string_value(v)) : -2;

		if (nr == -2)
			return fl_err(err, len, ".syscalls[].names", "strings");
		if (nr < 0) {
			f->n_unknown++;
			continue;
		}
		if ((rc = fl_rules_for(f, (uint16_t)nr, &tmpl, conds, n)))
			return rc == -E2BIG ? fl_err(err, len, ".syscalls", "too many rules") : rc;
	}
	return 0;
}

/* The header: default action, architectures, flags, no listener. */
static int fl_head(json_t *p, struct lx_filter *f, char *err, size_t len)
{
	json_t *archs = json_object_get(p, "architectures"), *flags = json_object_get(p, "flags"), *v;
	enum lx_filter_act act;
	bool x86_64 = json_array_size(archs) == 0;
	size_t i;
	int rc;

	if (!json_is_object(p))
		return fl_err(err, len, "", "an object");
	if ((rc = fl_action(json_object_get(p, "defaultAction"), ".defaultAction", &act, err, len)) ||
	    (rc = fl_errno(json_object_get(p, "defaultErrnoRet"), ".defaultErrnoRet", &f->def_errno,
			   err, len)))
		return rc;
	f->def_act = (uint8_t)act;
	json_array_foreach(archs, i, v)
		x86_64 |= json_is_string(v) && strcmp(json_string_value(v), "SCMP_ARCH_X86_64") == 0;
	if (!x86_64)
		return fl_err(err, len, ".architectures", "a guest is x86-64, which it does not name");
	json_array_foreach(flags, i, v) {
		bool ok = false;

		for (size_t k = 0; k < sizeof(known_flags) / sizeof(known_flags[0]); k++)
			ok |= json_is_string(v) && strcmp(json_string_value(v), known_flags[k]) == 0;
		if (!ok)
			return fl_err(err, len, ".flags", "an unknown flag");
	}
	if (json_object_get(p, "listenerPath") && !json_is_null(json_object_get(p, "listenerPath")))
		return fl_err(err, len, ".listenerPath", "ccvm has no seccomp listener");
	return 0;
}

static int fl_cmp_nr(const void *a, const void *b)
{
	const struct lx_filter_rule *x = a, *y = b;

	return (int)x->nr - (int)y->nr;
}

/* Rules sorted by call, and where each call's start. */
static int fl_index(struct lx_filter *f)
{
	size_t r = 0;

	if (f->n_rules)
		qsort(f->rules, f->n_rules, sizeof(*f->rules), fl_cmp_nr);
	f->first = calloc(LX_NR_SYSCALLS + 1, sizeof(*f->first));
	if (!f->first)
		return -ENOMEM;
	for (unsigned nr = 0; nr <= LX_NR_SYSCALLS; nr++) {
		while (r < f->n_rules && f->rules[r].nr < nr)
			r++;
		f->first[nr] = (uint32_t)r;
	}
	return 0;
}

int lx_filter_parse(json_t *p, struct lx_filter *f, char *err, size_t len)
{
	json_t *calls = json_object_get(p, "syscalls"), *e;
	size_t i;
	int rc;

	memset(f, 0, sizeof(*f));
	if ((rc = fl_head(p, f, err, len)))
		return rc;
	if (calls && !json_is_null(calls) && !json_is_array(calls))
		return fl_err(err, len, ".syscalls", "an array");
	json_array_foreach(calls, i, e) {
		if ((rc = fl_entry(f, e, err, len))) {
			lx_filter_free(f);
			return rc;
		}
	}
	if ((rc = fl_index(f)))
		lx_filter_free(f);
	return rc;
}

void lx_filter_free(struct lx_filter *f)
{
	free(f->rules);
	free(f->first);
	memset(f, 0, sizeof(*f));
}

static bool fl_holds(const struct lx_filter_cond *c, const uint64_t a[6])
{
	uint64_t x = a[c->index];

	switch (c->op) {
	case OP_NE: return x != c->value;
	case OP_LT: return x < c->value;
	case OP_LE: return x <= c->value;
	case OP_EQ: return x == c->value;
	case OP_GE: return x >= c->value;
	case OP_GT: return x > c->value;
	default: return (x & c->value) == c->value2;
	}
}

struct lx_filter_verdict lx_filter_check(const struct lx_filter *f, uint64_t nr, const uint64_t a[6])
{
	struct lx_filter_verdict v = { .act = (enum lx_filter_act)f->def_act, .err = f->def_errno };
	bool matched = false;

	if (nr >= LX_NR_SYSCALLS)
		return v;
	for (uint32_t r = f->first[nr]; r < f->first[nr + 1]; r++) {
		const struct lx_filter_rule *rule = &f->rules[r];
		bool all = true;

		for (int k = 0; k < rule->n_conds && all; k++)
			all = fl_holds(&rule->conds[k], a);
		if (!all || (matched && rule->act <= v.act))
			continue;
		matched = true;
		v.act = (enum lx_filter_act)rule->act;
		v.err = rule->errno_ret;
	}
	return v;
}

int lx_filter_allows_all(const struct lx_filter *f, uint64_t nr)
{
	bool plain_allow = false;

	if (nr >= LX_NR_SYSCALLS)
		return f->def_act <= LX_FA_LOG;
	for (uint32_t r = f->first[nr]; r < f->first[nr + 1]; r++) {
		if (f->rules[r].act > LX_FA_LOG)
			return 0;
		plain_allow |= f->rules[r].n_conds == 0;
	}
	return plain_allow || f->def_act <= LX_FA_LOG;
}

int lx_filter_load(const char *path, struct lx_filter *f, char *err, size_t len)
{
	json_error_t jerr;
	struct stat st;
	json_t *j = NULL;
	char *text = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > LX_FILTER_MAX_FILE) {
		rc = fd < 0 ? -errno : -EINVAL;
		snprintf(err, len, "%s", fd < 0 ? strerror(errno) : "not a regular file of at most 4 MiB");
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text || pread(fd, text, (size_t)st.st_size, 0) != st.st_size) {
		rc = text ? -EIO : -ENOMEM;
		snprintf(err, len, "cannot read it whole");
		goto out;
	}
	j = json_loadb(text, (size_t)st.st_size, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		rc = -EINVAL;
		snprintf(err, len, "line %d: %s", jerr.line, jerr.text);
		goto out;
	}
	rc = lx_filter_parse(j, f, err, len);
out:
	json_decref(j);
	free(text);
	if (fd >= 0)
		close(fd);
	return rc;
}
