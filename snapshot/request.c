/*
 * request.c - a snapshot request checked and named: policies, orders and pre-copy
 * modes as users write them, and the storage settings a request may ask for.
 */
#include "request.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

bool snap_copies_in_pause(const struct snap_request *req)
{
	return req->policy == SNAP_CCOW && req->precopy != SNAP_PRECOPY_LAZY;
}

bool snap_precopies_rounds(const struct snap_request *req)
{
	return req->policy == SNAP_CCOW && req->precopy == SNAP_PRECOPY_ROUNDS;
}
