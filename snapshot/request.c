/*
 * request.c - a snapshot request checked and named: policies, orders and pre-copy
 * modes as users write them, the one table of the fields a request takes (for the
 * command line and the control socket alike), and the storage settings it may ask for.
 */
#include "request.h"
#include "../base/num.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define REQ_STR_(x) #x
#define REQ_STR(x) REQ_STR_(x)
#define REQ_MAX_BUDGET_MS 10000   /* --pause-budget-ms: ten seconds of pause at most */
#define REQ_PREFIX "snapshot-"
#define REQ_SYNOPSIS_MAX 512

static const char *const policy_names[SNAP_NR_POLICIES] = { "stop", "cow", "ccow", "fork" };

const char *snap_policy_name(enum snap_policy p)
{
	return (unsigned)p < SNAP_NR_POLICIES ? policy_names[p] : "?";
}

int snap_policy_parse(const char *name, enum snap_policy *p)
{
	for (int i = 0; i < SNAP_NR_POLICIES; i++)
		if (strcmp(name, policy_names[i]) == 0) {
			*p = (enum snap_policy)i;
			return 0;
		}
	return -EINVAL;
}

int snap_order_parse(const char *name, enum snap_order *o)
{
	if (strcmp(name, "hot-first") == 0)
		*o = SNAP_HOT_FIRST;
	else if (strcmp(name, "linear") == 0)
		*o = SNAP_LINEAR;
	else
		return -EINVAL;
	return 0;
}

static const char *const precopy_names[] = { "lazy", "eager", "rounds", "auto" };
#define PRECOPY_NR ((int)(sizeof(precopy_names) / sizeof(precopy_names[0])))

const char *snap_precopy_name(enum snap_precopy p)
{
	return (int)p >= 0 && (int)p < PRECOPY_NR ? precopy_names[p] : "?";
}

int snap_precopy_parse(const char *name, enum snap_precopy *p)
{
	for (int i = 0; i < PRECOPY_NR; i++)
		if (strcmp(name, precopy_names[i]) == 0) {
			*p = (enum snap_precopy)i;
			return 0;
		}
	return -EINVAL;
}

int snap_storage_check(struct snap_request *req, char *err, size_t errlen)
{
	if ((unsigned)req->codec >= IMG_CODEC_NR) {
		snprintf(err, errlen, "unknown compression (known: auto, zstd, lz4, none)");
		return -EINVAL;
	}
	if (!req->level)
		req->level = codec_default_level(req->codec);
	if (codec_level_check(req->codec, req->level)) {
		snprintf(err, errlen, req->codec == IMG_CODEC_NONE ?
			 "--compress-level needs a codec (--compress zstd or lz4)" :
			 req->codec == IMG_CODEC_AUTO ?
			 "--compress-level needs a codec (--compress zstd or lz4): auto chooses "
			 "a level for each chunk" :
			 req->codec == IMG_CODEC_ZSTD ?
			 "--compress-level for zstd must be from -7 to 19, not 0" :
			 "--compress-level for lz4 must be from -64 (fastest) to 12 (high compression), "
			 "not 0");
		return -EINVAL;
	}
	if (!req->threads)
		req->threads = SNAP_DEFAULT_THREADS;
	if (req->threads < 1 || req->threads > SNAP_THREADS_MAX) {
		snprintf(err, errlen, "--snapshot-threads must be from 1 to %d", SNAP_THREADS_MAX);
		return -EINVAL;
	}
	return 0;
}

struct snap_mode snap_mode_of(const struct snap_request *req)
{
	static const enum snap_write writes[SNAP_NR_POLICIES] = {
		[SNAP_STOP] = SNAP_WRITE_PAUSED, [SNAP_FORK] = SNAP_WRITE_FORKED,
		[SNAP_COW] = SNAP_WRITE_BACKGROUND, [SNAP_CCOW] = SNAP_WRITE_BACKGROUND,
	};
	bool ccow = req->policy == SNAP_CCOW, wp = ccow || req->policy == SNAP_COW;
	struct snap_mode m = { .arm = wp ? SNAP_ARM_PROTECT : SNAP_ARM_NONE,
			       .pause_copies = ccow && req->precopy != SNAP_PRECOPY_LAZY,
			       .plan = req->policy,
			       .write = writes[req->policy < SNAP_NR_POLICIES ? req->policy : SNAP_STOP] };

	if (ccow && req->precopy == SNAP_PRECOPY_ROUNDS) {
		m.arm = SNAP_ARM_ROUNDS;
		m.plan = SNAP_COW;
		m.write = SNAP_WRITE_ROUNDS;
	}
	return m;
}

#define F(k, kind, lo, hi, field, run, meta, want) \
	{ k, kind, lo, hi, offsetof(struct snap_request, field), run, meta, want }

/* In the order a request is applied: a codec before its level. */
static const struct snap_field fields[] = {
	F("policy", SNAP_F_POLICY, 0, 0, policy, true, "ccow|cow|stop|fork",
	  "known policies are ccow, cow, stop and fork"),
	F("threshold", SNAP_F_REAL, 0, 1, threshold, true, "T",
	  "a coverage from 0 (CCoW-All) to 1"),
	F("save-order", SNAP_F_ORDER, 0, 0, order, true, "hot-first|linear", "hot-first or linear"),
	F("precopy", SNAP_F_PRECOPY, 0, 0, precopy, true, "lazy|eager|rounds|auto",
	  "lazy, eager, rounds or auto"),
	F("pause-budget-ms", SNAP_F_REAL, 0, REQ_MAX_BUDGET_MS, pause_budget_ms, true, "MS",
	  "milliseconds, 0 to " REQ_STR(REQ_MAX_BUDGET_MS)),
	F("rate", SNAP_F_RATE, 0, SNAP_MAX_RATE_MBS, rate, true, "MB/s",
	  "MB/s, a number from 0 (unlimited) to 1000000"),
	F("compress", SNAP_F_CODEC, 0, 0, codec, true, "auto|zstd|lz4|none",
	  "auto, zstd, lz4 or none"),
	F("compress-level", SNAP_F_LEVEL, INT16_MIN, INT16_MAX, level, true, "N",
	  "an integer, not 0 (" CODEC_LEVEL_RANGES ")"),
	F("threads", SNAP_F_INT, 1, SNAP_THREADS_MAX, threads, true, "N",
	  "from 1 to " REQ_STR(SNAP_THREADS_MAX) ", an integer"),
	F("parent", SNAP_F_PATH, 0, 0, parent, false, "PARENT",
	  "the path of the VM's latest snapshot taken with tracking"),
	F("track", SNAP_F_FLAG, 0, 0, track, false, NULL, "takes no value"),
	F("compact", SNAP_F_COMPACT, 0, 0, compact, true, "idle|off", "idle or off"),
};
#undef F

#define FIELDS_N ((int)(sizeof(fields) / sizeof(fields[0])))

const struct snap_field *snap_field_at(int i)
{
	return i >= 0 && i < FIELDS_N ? &fields[i] : NULL;
}

const struct snap_field *snap_field_find(const char *key)
{
	if (strncmp(key, REQ_PREFIX, strlen(REQ_PREFIX)) == 0)
		key += strlen(REQ_PREFIX);
	for (int i = 0; i < FIELDS_N; i++)
		if (strcmp(fields[i].key, key) == 0)
			return &fields[i];
	return NULL;
}

/* An integer field (every one fits an int) within its bounds. */
static int parse_int(const struct snap_field *f, const char *text, int *v)
{
	long x;

	if (num_parse_long(text, (long)f->min, (long)f->max, &x))
		return -EINVAL;
	*v = (int)x;
	return 0;
}

/* @text into the field at @at; 0 or -EINVAL. */
static int field_parse(const struct snap_field *f, const char *text, void *at)
{
	double d;

	switch (f->kind) {
	case SNAP_F_POLICY: return snap_policy_parse(text, at);
	case SNAP_F_ORDER: return snap_order_parse(text, at);
	case SNAP_F_PRECOPY: return snap_precopy_parse(text, at);
	case SNAP_F_CODEC: return codec_parse(text, at);
	case SNAP_F_LEVEL: return parse_int(f, text, at) || !*(int *)at ? -EINVAL : 0;
	case SNAP_F_INT: return parse_int(f, text, at);
	case SNAP_F_REAL: return num_parse_real(text, f->min, f->max, at);
	case SNAP_F_RATE:
		if (num_parse_real(text, f->min, f->max, &d))
			return -EINVAL;
		*(uint64_t *)at = (uint64_t)(d * 1e6);
		return 0;
	case SNAP_F_PATH:
		*(const char **)at = text;
		return *text ? 0 : -EINVAL;
	case SNAP_F_COMPACT:
		if (strcmp(text, "idle") && strcmp(text, "off"))
			return -EINVAL;
		*(enum snap_compact *)at = strcmp(text, "idle") ? SNAP_COMPACT_OFF : SNAP_COMPACT_IDLE;
		return 0;
	case SNAP_F_FLAG: break;
	}
	return -EINVAL; /* a flag's value came as text */
}

int snap_field_set(struct snap_request *req, const struct snap_field *f, const char *prefix,
		   const char *text, char *err, size_t errlen)
{
	void *at = (char *)req + f->off;
	union { int i; double d; uint64_t u; const char *s; } tmp;

	if (f->kind == SNAP_F_FLAG && !text) {
		*(bool *)at = true;
		return 0;
	}
	if (!text) {
		snprintf(err, errlen, "--%s%s needs a value: %s", prefix, f->key, f->want);
		return -EINVAL;
	}
	/* Parsed aside first: a bad value leaves the request as it was. */
	if (field_parse(f, text, &tmp)) {
		snprintf(err, errlen, "--%s%s %s: %s", prefix, f->key, text, f->want);
		return -EINVAL;
	}
	field_parse(f, text, at);
	return 0;
}

static char synopsis[REQ_SYNOPSIS_MAX];

int snap_field_usage(const struct snap_field *f, char *buf, size_t len)
{
	return snprintf(buf, len, " [--%s%s%s]", f->key, f->metavar ? " " : "",
			f->metavar ? f->metavar : "");
}

static void synopsis_build(void)
{
	size_t n = 0;

	for (int i = 0; i < FIELDS_N && n < sizeof(synopsis); i++)
		n += (size_t)snap_field_usage(&fields[i], synopsis + n, sizeof(synopsis) - n);
}

/* Without the first item's leading space. */
const char *snap_fields_synopsis(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, synopsis_build);
	return synopsis + 1;
}
