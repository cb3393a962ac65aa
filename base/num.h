/*
 * num.h - numbers as users write them, the whole string and within bounds: the one
 * parser of the command line (vmm/cli.c, options.c) and of a snapshot request's fields
 * (snapshot/request.c), so that both refuse the same text.
 */
#ifndef CCVM_NUM_H
#define CCVM_NUM_H

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

/* A finite @v within [lo, hi]. */
static inline bool num_real_ok(double v, double lo, double hi)
{
	return isfinite(v) && v >= lo && v <= hi;
}

/* A decimal number in [lo, hi], the whole string: 0 or -EINVAL (empty, trailing
 * text, NaN, infinite, out of range). */
static inline int num_parse_real(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end || errno == ERANGE || !num_real_ok(v, lo, hi))
		return -EINVAL;
	*out = v;
	return 0;
}

/* A decimal integer in [lo, hi], the whole string: 0 or -EINVAL. */
static inline int num_parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end || errno || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

#endif
