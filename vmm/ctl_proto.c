/*
 * ctl_proto.c - parse control requests and format replies (no sockets, no VM).
 *
 * Kept apart from the socket server so that every malformed input can be unit-tested:
 * a request must be a single JSON object with a string "cmd" naming a known command;
 * anything else gets an error reply that says what was wrong.
 */
#include "ctl_proto.h"

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const ctl_names[CTL_NR_CMDS] = {
	[CTL_STATUS] = "status", [CTL_PAUSE] = "pause", [CTL_RESUME] = "resume",
	[CTL_STATS] = "stats",   [CTL_QUIT] = "quit",     [CTL_SNAPSHOT] = "snapshot",
	[CTL_EVENTS] = "events", [CTL_KILL] = "kill",     [CTL_MIGRATE] = "migrate",
	[CTL_EXEC] = "exec",
};

const char *ctl_cmd_name(enum ctl_cmd cmd)
{
	return (unsigned)cmd < CTL_NR_CMDS ? ctl_names[cmd] : "?";
}

int ctl_parse(const char *line, size_t len, struct ctl_request *req, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *msg, *cmd;
	const char *name;

	memset(req, 0, sizeof(req[0]));
	if (len >= CTL_MAX_LINE) {
		snprintf(err, errlen, "request too long (%zu bytes; at most %d)", len,
			 CTL_MAX_LINE - 1);
		return -EINVAL;
	}
	msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!msg) {
		snprintf(err, errlen, "request is not valid JSON: %s (column %d)", jerr.text,
			 jerr.column);
		return -EINVAL;
	}
	if (!json_is_object(msg)) {
		snprintf(err, errlen, "request must be a JSON object, like {\"cmd\":\"status\"}");
		goto fail;
	}
	cmd = json_object_get(msg, "cmd");
	if (!json_is_string(cmd)) {
		snprintf(err, errlen, "request has no \"cmd\" string");
		goto fail;
	}
	name = json_string_value(cmd);
	for (int i = 0; i < CTL_NR_CMDS; i++)
		if (strcmp(name, ctl_names[i]) == 0) {
			req->cmd = (enum ctl_cmd)i;
			req->msg = msg;
			return 0;
		}
	snprintf(err, errlen, "unknown command '%.64s' (known: status, pause, resume, stats, quit, snapshot, events, kill, migrate, exec)",
		 name);
fail:
	json_decref(msg);
	return -EINVAL;
}

void ctl_request_free(struct ctl_request *req)
{
	json_decref(req->msg);
	req->msg = NULL;
}

static char *ctl_dump_line(json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	char *line;
	size_t n;

	if (!s)
		return NULL;
	n = strlen(s);
	line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	return line;
}

char *ctl_reply_ok(json_t *obj)
{
	json_t *reply = json_object();
	char *line;

	json_object_set_new(reply, "ok", json_true());
	if (obj)
		json_object_update(reply, obj);
	line = ctl_dump_line(reply);
	json_decref(reply);
	json_decref(obj);
	return line;
}

char *ctl_line(json_t *obj)
{
	char *line = ctl_dump_line(obj);

	json_decref(obj);
	return line;
}

char *ctl_reply_error(const char *msg)
{
	json_t *reply = json_pack("{s:b, s:s}", "ok", 0, "error", msg);
	char *line = ctl_dump_line(reply);

	json_decref(reply);
	return line;
}

static json_t *ctl_value(const char *word)
{
	char *end;
	long long v;
	double d;

	errno = 0;
	v = strtoll(word, &end, 10);
	if (*word && !*end && !errno)
		return json_integer(v);
	errno = 0;
	d = strtod(word, &end);
	if (*word && !*end && !errno)
		return json_real(d);
	return json_string(word);
}

json_t *ctl_request_from_argv(const char *cmd, int argc, char *const *argv, char *err,
			      size_t errlen)
{
	json_t *req = json_pack("{s:s}", "cmd", cmd);
	json_t *args = json_array();

	for (int i = 0; i < argc; i++) {
		const char *w = argv[i];

		if (strncmp(w, "--", 2) == 0 && w[2]) {
			const char *key = w + 2;

			if (strcmp(key, "cmd") == 0 || strcmp(key, "args") == 0) {
				snprintf(err, errlen, "option --%s is reserved", key);
				json_decref(args);
				json_decref(req);
				return NULL;
			}
			if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
				json_object_set_new(req, key, ctl_value(argv[++i]));
			else
				json_object_set_new(req, key, json_true());
		} else {
			json_array_append_new(args, json_string(w));
		}
	}
	if (json_array_size(args))
		json_object_set_new(req, "args", args);
	else
		json_decref(args);
	return req;
}

/* A decimal number in [lo, hi] making up all of @s: 0, or -EINVAL. */
static int ctl_number(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	if (!*s || *s == '+' || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

int ctl_signal_parse(const char *s, int *sig)
{
	const int rtmin = SIGRTMIN, rtmax = SIGRTMAX, nsig = 64;
	int n;

	if (ctl_number(s, 1, nsig, sig) == 0)
		return 0;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	/* The real-time ones as the guest's libc numbers them (glibc keeps two). */
	if (strncasecmp(s, "RTMIN", 5) == 0 || strncasecmp(s, "RTMAX", 5) == 0) {
		bool min = strncasecmp(s, "RTMIN", 5) == 0;

		if (!s[5])
			n = 0;
		else if (s[5] != (min ? '+' : '-') || ctl_number(s + 6, 0, rtmax - rtmin, &n))
			return -EINVAL;
		*sig = min ? rtmin + n : rtmax - n;
		return 0;
	}
	for (int i = 1; i < rtmin; i++) {
		const char *name = sigabbrev_np(i);

		if (name && strcasecmp(s, name) == 0) {
			*sig = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* @d as text, as short as reads back the same number (what a message shows). */
static void ctl_real_text(double d, char *buf, size_t len)
{
	snprintf(buf, len, "%.15g", d);
	if (strtod(buf, NULL) != d)
		snprintf(buf, len, "%.17g", d);
}

/* A JSON value of a request as the text the command line would have given: NULL for a
 * bare flag (true); 0, or -EINVAL for what no command line writes (objects, false). */
static int ctl_field_text(const json_t *v, char *buf, size_t len, const char **text)
{
	*text = buf;
	if (json_is_true(v))
		*text = NULL;
	else if (json_is_string(v))
		*text = json_string_value(v);
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		ctl_real_text(json_real_value(v), buf, len);
	else
		return -EINVAL;
	return 0;
}

int ctl_snapshot_field(const json_t *v, const struct snap_field *f, const char *prefix,
		       struct snap_request *sr, char *err, size_t len)
{
	char num[64];
	const char *text;

	if (f->kind == SNAP_F_FLAG && json_is_false(v)) { /* a client's explicit "off" */
		*(bool *)((char *)sr + f->off) = false;
		return 0;
	}
	if (ctl_field_text(v, num, sizeof(num), &text)) {
		snprintf(err, len, "--%s%s: %s", prefix, f->key, f->want);
		return -EINVAL;
	}
	return snap_field_set(sr, f, prefix, text, err, len);
}

/* A codec named without a level gets its own default level, not the level the VM's
 * default codec was given. */
int ctl_snapshot_fields(const json_t *msg, struct snap_request *sr, char *err, size_t len)
{
	const struct snap_field *f;
	bool level = false, codec = false;

	for (int i = 0; (f = snap_field_at(i)); i++) {
		char key[64];
		const char *prefix = "";
		json_t *v = json_object_get(msg, f->key);

		snprintf(key, sizeof(key), "snapshot-%s", f->key);
		if (!v && (v = json_object_get(msg, key)))
			prefix = "snapshot-";
		if (!v)
			continue;
		if (ctl_snapshot_field(v, f, prefix, sr, err, len))
			return -EINVAL;
		codec = codec || f->kind == SNAP_F_CODEC;
		level = level || f->kind == SNAP_F_LEVEL;
	}
	if (codec && !level)
		sr->level = 0;
	return 0;
}
