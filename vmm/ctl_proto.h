/*
 * ctl_proto.h - the control protocol: one JSON object per line, one reply per request.
 */
#ifndef CCVM_CTL_PROTO_H
#define CCVM_CTL_PROTO_H

#include "../snapshot/request.h"

#include <jansson.h>
#include <stddef.h>

#define CTL_MAX_LINE 65536 /* longest request line accepted, newline included */

enum ctl_cmd {
	CTL_STATUS,
	CTL_PAUSE,
	CTL_RESUME,
	CTL_STATS,
	CTL_QUIT,
	CTL_SNAPSHOT,
	CTL_EVENTS,
	CTL_KILL,
	CTL_MIGRATE,
	CTL_EXEC,
	CTL_NR_CMDS
};

struct ctl_request {
	enum ctl_cmd cmd;
	json_t *msg; /* the whole request object (owned) */
};

/* Parse one request line (without its newline). Returns 0, or -EINVAL with a message
 * for the error reply in @err. */
int ctl_parse(const char *line, size_t len, struct ctl_request *req, char *err, size_t errlen);
void ctl_request_free(struct ctl_request *req);

/* A reply line (malloc'd, ends in "\n"). ctl_reply_ok adds "ok": true to @obj and
 * takes its reference; ctl_reply_error builds {"ok":false,"error":msg}. */
char *ctl_reply_ok(json_t *obj);
char *ctl_reply_error(const char *msg);
/* Any object as one line (malloc'd, ends in "\n"); takes the reference of @obj. */
char *ctl_line(json_t *obj);

/* Client side: turn `COMMAND [ARGS...]` into a request object. Positional words go to
 * "args"; `--key value` becomes "key": value (numbers as numbers); a `--flag` with no
 * value becomes true. Returns NULL with @err set on a bad word. */
json_t *ctl_request_from_argv(const char *cmd, int argc, char *const *argv, char *err,
			      size_t errlen);

const char *ctl_cmd_name(enum ctl_cmd cmd);

/* `kill`'s SIGNAL: a name with or without SIG, in any case (TERM, SIGterm, RTMIN+2),
 * or a number 1..64. 0 with *@sig set, or -EINVAL. */
int ctl_signal_parse(const char *s, int *sig);

/* The snapshot request fields @msg names (snapshot/request.c's table, as --KEY or
 * --snapshot-KEY) into @sr: 0, or -EINVAL with the command line's message in @err. */
int ctl_snapshot_fields(const json_t *msg, struct snap_request *sr, char *err, size_t len);
/* One of them, the JSON value @v of field @f (named with @prefix), into @sr: the same. */
int ctl_snapshot_field(const json_t *v, const struct snap_field *f, const char *prefix,
		       struct snap_request *sr, char *err, size_t len);

#endif
