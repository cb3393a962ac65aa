/*
 * test_ctl_proto.c - control requests: good ones parse, bad ones get a clear error.
 */
#include "suites.h"
#include "../../vmm/ctl_proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *line, struct ctl_request *req, char *err)
{
	return ctl_parse(line, strlen(line), req, err, 256);
}

/* Every known command parses; extra fields are allowed. */
START_TEST(test_known_commands)
{
	const char *names[] = { "status", "pause", "resume", "stats", "quit" };
	struct ctl_request req;
	char line[128], err[256];

	for (int i = 0; i < 5; i++) {
		snprintf(line, sizeof(line), "{\"cmd\":\"%s\",\"extra\":[1,2]}", names[i]);
		ck_assert_msg(parse(line, &req, err) == 0, "%s: %s", line, err);
		ck_assert_str_eq(ctl_cmd_name(req.cmd), names[i]);
		ctl_request_free(&req);
	}
}
END_TEST

/* Garbage, wrong types, missing or unknown commands: each says what is wrong. */
START_TEST(test_bad_requests)
{
	static const struct {
		const char *line, *needle;
	} cases[] = {
		{ "garbage", "not valid JSON" },
		{ "", "not valid JSON" },
		{ "[1,2]", "must be a JSON object" },
		{ "{}", "no \"cmd\"" },
		{ "{\"cmd\":5}", "no \"cmd\"" },
		{ "{\"cmd\":\"reboot\"}", "unknown command 'reboot'" },
		{ "{\"cmd\":\"status\",\"cmd\":\"quit\"}", "not valid JSON" },
		{ "{\"cmd\":\"status\"} trailing", "not valid JSON" },
	};
	struct ctl_request req;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_msg(parse(cases[i].line, &req, err) == -EINVAL, "'%s' accepted",
			      cases[i].line);
		ck_assert_msg(strstr(err, cases[i].needle), "'%s': error '%s' lacks '%s'",
			      cases[i].line, err, cases[i].needle);
	}
}
END_TEST

/* A request at the size limit is refused before any parsing. */
START_TEST(test_oversized)
{
	struct ctl_request req;
	char err[256];
	char *big = malloc(CTL_MAX_LINE + 10);

	memset(big, ' ', CTL_MAX_LINE + 10);
	ck_assert_int_eq(ctl_parse(big, CTL_MAX_LINE + 10, &req, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "too long"), "%s", err);
	free(big);
}
END_TEST

/* Replies are single JSON lines with "ok". */
START_TEST(test_replies)
{
	char *ok = ctl_reply_ok(json_pack("{s:s}", "state", "running"));
	char *bad = ctl_reply_error("it \"broke\"");

	ck_assert_str_eq(ok, "{\"ok\":true,\"state\":\"running\"}\n");
	ck_assert_str_eq(bad, "{\"ok\":false,\"error\":\"it \\\"broke\\\"\"}\n");
	free(ok);
	free(bad);
}
END_TEST

/* The client maps words to fields: positionals to "args", --k v to k, --flag to true. */
START_TEST(test_from_argv)
{
	char *argv[] = { "file.img", "--policy", "cow", "--wait", "--rate", "150", "--threshold", "0.5" };
	char err[256];
	json_t *req = ctl_request_from_argv("snapshot", 8, argv, err, sizeof(err));
	char *s;

	ck_assert_ptr_nonnull(req);
	s = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(s, "{\"args\":[\"file.img\"],\"cmd\":\"snapshot\",\"policy\":\"cow\","
			    "\"rate\":150,\"threshold\":0.5,\"wait\":true}");
	free(s);
	json_decref(req);
	char *bad[] = { "--cmd", "x" };
	ck_assert_ptr_null(ctl_request_from_argv("status", 2, bad, err, sizeof(err)));
}
END_TEST

/* kill's SIGNAL: names with or without SIG in any case, real-time ones as glibc
 * numbers them, numbers 1..64; anything else is refused. */
START_TEST(test_signal_names)
{
	static const struct {
		const char *s;
		int sig; /* 0: refused */
	} cases[] = {
		{ "TERM", 15 },     { "SIGterm", 15 },   { "sigint", 2 },     { "9", 9 },
		{ "64", 64 },       { "HUP", 1 },        { "SIGUSR1", 10 },   { "RTMIN", 34 },
		{ "RTMIN+2", 36 },  { "SIGRTMAX-1", 63 }, { "rtmax", 64 },    { "65", 0 },
		{ "0", 0 },         { "-9", 0 },         { "+9", 0 },         { "9x", 0 },
		{ "", 0 },          { "SIG", 0 },        { "FOO", 0 },        { "RTMIN+31", 0 },
		{ "RTMIN-1", 0 },   { "RTMAX+1", 0 },    { "SIGSIGTERM", 0 }, { "RTMIN+", 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int sig = 0, rc = ctl_signal_parse(cases[i].s, &sig);

		ck_assert_msg(cases[i].sig ? rc == 0 && sig == cases[i].sig : rc == -EINVAL,
			      "'%s': rc %d, signal %d", cases[i].s, rc, sig);
	}
}
END_TEST

Suite *ctl_proto_suite(void)
{
	Suite *s = suite_create("ctl_proto");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_known_commands);
	tcase_add_test(tc, test_bad_requests);
	tcase_add_test(tc, test_oversized);
	tcase_add_test(tc, test_replies);
	tcase_add_test(tc, test_from_argv);
	tcase_add_test(tc, test_signal_names);
	suite_add_tcase(s, tc);
	return s;
}
