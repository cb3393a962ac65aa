/*
 * rlimit.c - resource limits by name.
 *
 * `ccvm run --rlimit` and ccvm-oci's process.rlimits give a guest limits of its own at
 * start; they are the personality's (getrlimit, prlimit64), never the monitor's, which
 * may not raise its own past what it holds (root without CAP_SYS_RESOURCE on our
 * machines). One table of names serves both.
 */
#include "rlimit.h"

#include "../../base/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const rlimit_names[RLIM_NLIMITS] = {
	[RLIMIT_CPU] = "RLIMIT_CPU",         [RLIMIT_FSIZE] = "RLIMIT_FSIZE",
	[RLIMIT_DATA] = "RLIMIT_DATA",       [RLIMIT_STACK] = "RLIMIT_STACK",
	[RLIMIT_CORE] = "RLIMIT_CORE",       [RLIMIT_RSS] = "RLIMIT_RSS",
	[RLIMIT_NPROC] = "RLIMIT_NPROC",     [RLIMIT_NOFILE] = "RLIMIT_NOFILE",
	[RLIMIT_MEMLOCK] = "RLIMIT_MEMLOCK", [RLIMIT_AS] = "RLIMIT_AS",
	[RLIMIT_LOCKS] = "RLIMIT_LOCKS",     [RLIMIT_SIGPENDING] = "RLIMIT_SIGPENDING",
	[RLIMIT_MSGQUEUE] = "RLIMIT_MSGQUEUE", [RLIMIT_NICE] = "RLIMIT_NICE",
	[RLIMIT_RTPRIO] = "RLIMIT_RTPRIO",   [RLIMIT_RTTIME] = "RLIMIT_RTTIME",
};

#define RLIMIT_PREFIX "RLIMIT_"

int lx_rlimit_by_name(const char *name)
{
	size_t skip = strlen(RLIMIT_PREFIX);

	for (int r = 0; r < RLIM_NLIMITS; r++) {
		if (!rlimit_names[r])
			continue;
		if (strcasecmp(name, rlimit_names[r]) == 0 ||
		    strcasecmp(name, rlimit_names[r] + skip) == 0)
			return r;
	}
	return -EINVAL;
}

const char *lx_rlimit_name(int resource)
{
	if (resource < 0 || resource >= RLIM_NLIMITS)
		return NULL;
	return rlimit_names[resource];
}

/* A limit's value: digits, the whole string, or "unlimited". */
static int rlimit_value(const char *s, size_t n, rlim_t *out)
{
	char buf[32], *end;
	unsigned long long v;

	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (strcmp(buf, "unlimited") == 0) {
		*out = RLIM_INFINITY;
		return 0;
	}
	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = (rlim_t)v;
	return 0;
}

int lx_rlimit_parse(const char *arg, struct lx_rlimits *lims, char *err, size_t len)
{
	const char *eq = strchr(arg, '='), *colon;
	char name[32];
	struct rlimit rl;
	int r;

	if (!eq || (size_t)(eq - arg) >= sizeof(name))
		return log_set_err(-EINVAL, err, len, "expected NAME=SOFT[:HARD], as nofile=1024:4096");
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = '\0';
	r = lx_rlimit_by_name(name);
	if (r < 0)
		return log_set_err(-EINVAL, err, len, "no resource limit is called '%s'", name);
	colon = strchr(eq + 1, ':');
	if (rlimit_value(eq + 1, colon ? (size_t)(colon - eq - 1) : strlen(eq + 1), &rl.rlim_cur) ||
	    rlimit_value(colon ? colon + 1 : eq + 1, strlen(colon ? colon + 1 : eq + 1), &rl.rlim_max))
		return log_set_err(-EINVAL, err, len, "a limit is a number or 'unlimited'");
	if (rl.rlim_cur > rl.rlim_max)
		return log_set_err(-EINVAL, err, len, "the soft limit is above the hard one");
	lims->rlim[r] = rl;
	lims->set |= 1u << r;
	return 0;
}
