/*
 * cli.h - command-line parsing helpers that need no VM (unit-tested).
 */
#ifndef CCVM_CLI_H
#define CCVM_CLI_H

#include "../base/num.h"
#include "../snapshot/request.h"

#include <stdbool.h>
#include <stdint.h>

/* "512M", "1G", "4096K", "2097152": bytes. Returns 0 or -EINVAL (no digits, bad
 * suffix, overflow). */
int cli_parse_size(const char *s, uint64_t *bytes);

/* A decimal number in [lo, hi], the whole string: 0 or -EINVAL (empty, trailing
 * text, NaN, infinite, out of range). Options turned into integers later stay
 * representable this way. The parser is base/num.h's, which snapshot requests use too. */
static inline int cli_parse_real(const char *s, double lo, double hi, double *out)
{
	return num_parse_real(s, lo, hi, out);
}

/* The same range check for a number that came from elsewhere (a JSON request). */
static inline bool cli_real_ok(double v, double lo, double hi)
{
	return num_real_ok(v, lo, hi);
}

/* Upper bounds that keep derived integers exact and far from overflow. */
#define CLI_MAX_RATE_MBS   SNAP_MAX_RATE_MBS /* snapshot and migration rates alike */
#define CLI_MAX_EVERY_S    1e6 /* seconds between periodic snapshots (11 days) */

#endif
