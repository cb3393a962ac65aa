/*
 * test_cli.c - option values: sizes with suffixes, and what is refused.
 */
#include "suites.h"
#include "../../vmm/cli.h"
#include "../../vmm/options.h"
#include "../../vmm/migrate.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <errno.h>

/* Suffixes K, M, G (and KiB/MB spellings) scale by powers of 1024. */
START_TEST(test_sizes)
{
	uint64_t v;

	ck_assert_int_eq(cli_parse_size("4096", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(cli_parse_size("512M", &v), 0);
	ck_assert_uint_eq(v, 512ULL << 20);
	ck_assert_int_eq(cli_parse_size("1G", &v), 0);
	ck_assert_uint_eq(v, 1ULL << 30);
	ck_assert_int_eq(cli_parse_size("2GiB", &v), 0);
	ck_assert_uint_eq(v, 2ULL << 30);
	ck_assert_int_eq(cli_parse_size("64k", &v), 0);
	ck_assert_uint_eq(v, 64ULL << 10);
	ck_assert_int_eq(cli_parse_size("0", &v), 0);
	ck_assert_uint_eq(v, 0);
}
END_TEST

/* No digits, unknown suffix, negative, overflow: all refused. */
START_TEST(test_bad_sizes)
{
	uint64_t v;
	const char *bad[] = { "", "G", "-1G", "1X", "1GG", "1.5G", "99999999999999999999",
			      "20000000000G", " 1G" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cli_parse_size(bad[i], &v) == -EINVAL, "'%s' accepted", bad[i]);
	ck_assert_int_eq(cli_parse_size(NULL, &v), -EINVAL);
}
END_TEST

/* Real-number options: finite and in range, the whole string; NaN, infinities, huge
 * values and trailing text refused (F11: `--snapshot-rate inf`, `--threshold nan`). */
START_TEST(test_reals)
{
	const char *bad[] = { "", "nan", "NaN", "inf", "-inf", "1e300", "1e999", "-0.5", "1.5",
			      "0.5x", " ", "0x" };
	double v = -1;

	ck_assert_int_eq(cli_parse_real("0.8", 0, 1, &v), 0);
	ck_assert(v == 0.8);
	ck_assert_int_eq(cli_parse_real("0", 0, 1, &v), 0);
	ck_assert_int_eq(cli_parse_real("1", 0, 1, &v), 0);
	ck_assert(v == 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cli_parse_real(bad[i], 0, 1, &v) == -EINVAL, "'%s' accepted", bad[i]);
	ck_assert_int_eq(cli_parse_real(NULL, 0, 1, &v), -EINVAL);
	ck_assert(cli_real_ok(1e6, 0, CLI_MAX_RATE_MBS));
	ck_assert(!cli_real_ok(1e300, 0, CLI_MAX_RATE_MBS));
	ck_assert(!cli_real_ok(__builtin_nan(""), 0, 1));
	ck_assert(!cli_real_ok(__builtin_inf(), 0, __builtin_inf()));
}
END_TEST

/* argv for opt_parse from a string of words. */
static int words(char *line, char **argv, int max)
{
	int n = 0;

	for (char *w = strtok(line, " "); w && n < max - 1; w = strtok(NULL, " "))
		argv[n++] = w;
	argv[n] = NULL;
	return n;
}

static int parse_line(enum opt_cmd cmd, const char *line, struct cli_opts *o)
{
	static char buf[512];
	static char *argv[32];
	int argc;

	snprintf(buf, sizeof(buf), "%s", line);
	argc = words(buf, argv, 32);
	return opt_parse(cmd, argc, argv, o) || opt_finish(cmd, o);
}

/* The shared table: run and restore take what they should, with their defaults. */
START_TEST(test_option_table)
{
	struct cli_opts o;

	ck_assert_int_eq(parse_line(OPT_RUN, "run --mem 64M --threshold 0.5 --snapshot-policy cow "
				    "--coverage-window off -- /bin/true x", &o), 0);
	ck_assert_uint_eq(o.mem, 64ULL << 20);
	ck_assert_double_eq(o.sched.req.threshold, 0.5);
	ck_assert_int_eq(o.sched.req.policy, SNAP_COW);
	ck_assert(!o.ccow.tracker);
	ck_assert_int_eq(o.argc, 2);
	ck_assert_str_eq(o.argv[0], "/bin/true");
	ck_assert_str_eq(o.rw[0], ".");
	ck_assert_int_eq(parse_line(OPT_RUN, "run -- /bin/true", &o), 0);
	ck_assert(o.ccow.tracker); /* ccow by default: coverage is tracked */
	ck_assert_uint_eq(o.mem, OPT_DEFAULT_MEM);
	ck_assert(!o.ccow.held_compress);
	ck_assert_int_eq(parse_line(OPT_RUN, "run --snapshot-held-compress on -- /bin/true", &o), 0);
	ck_assert(o.ccow.held_compress);
	ck_assert_int_ne(parse_line(OPT_RUN, "run --snapshot-held-compress yes -- /bin/true", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RESTORE, "restore --snapshot-held-compress on x.img", &o), 0);

	ck_assert_int_eq(parse_line(OPT_RESTORE, "restore --lazy snap.img --rw /tmp --vcpus 4", &o), 0);
	ck_assert(o.lazy);
	ck_assert_int_eq(o.vcpus, 4);
	ck_assert_str_eq(o.argv[0], "snap.img");
	ck_assert_uint_eq(o.mem, 0); /* the image's */
	ck_assert_int_eq(parse_line(OPT_RESTORE, "restore snap.img", &o), 0);
	ck_assert(!o.lazy);

	ck_assert_int_ne(parse_line(OPT_RUN, "run --lazy -- /bin/true", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RESTORE, "restore --fastio on snap.img", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RESTORE, "restore a.img b.img", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RESTORE, "restore", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RUN, "run --snapshot-every 1 -- /bin/true", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RUN, "run --snapshot-keep 0 -- /bin/true", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RUN, "run --region-size 48K -- /bin/true", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RUN, "run --mem 1M -- /bin/true", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RUN, "run --vcpus 0 -- /bin/true", &o), 0);
	ck_assert_int_ne(parse_line(OPT_RUN, "run", &o), 0);
	ck_assert_int_eq(opt_parse(OPT_RUN, 2, (char *[]){ "run", "--help", NULL }, &o), 0);
	ck_assert(o.help);
}
END_TEST

/* Is @name (an option's long name) in @text as the man page writes it, \-\-name? */
static bool man_has(const char *text, const char *name)
{
	char want[128], *w = want;

	w += sprintf(w, "\\-\\-");
	for (const char *c = name; *c && w < want + sizeof(want) - 3; c++)
		w += *c == '-' ? sprintf(w, "\\-") : sprintf(w, "%c", *c);
	for (const char *at = strstr(text, want); at; at = strstr(at + 1, want)) {
		char next = at[strlen(want)];

		if (!(next == '-' || next == '\\' || (next >= 'a' && next <= 'z')))
			return true;
	}
	return false;
}

/* The snapshot request's one table: run takes every field periodic snapshots may use as
 * --snapshot-KEY, the old unprefixed names still work, and a bad value gets the same
 * words whoever asks (the control socket calls the same snap_field_set). */
/* Each policy and pre-copy resolves into the one mode the engine's steps read. */
START_TEST(test_snapshot_modes)
{
	static const struct {
		enum snap_policy policy;
		enum snap_precopy precopy;
		enum snap_arm arm;
		bool pause_copies;
		enum snap_policy plan;
		enum snap_write write;
	} cases[] = {
		{ SNAP_STOP, SNAP_PRECOPY_LAZY, SNAP_ARM_NONE, false, SNAP_STOP, SNAP_WRITE_PAUSED },
		{ SNAP_FORK, SNAP_PRECOPY_ROUNDS, SNAP_ARM_NONE, false, SNAP_FORK, SNAP_WRITE_FORKED },
		{ SNAP_COW, SNAP_PRECOPY_EAGER, SNAP_ARM_PROTECT, false, SNAP_COW,
		  SNAP_WRITE_BACKGROUND },
		{ SNAP_CCOW, SNAP_PRECOPY_LAZY, SNAP_ARM_PROTECT, false, SNAP_CCOW,
		  SNAP_WRITE_BACKGROUND },
		{ SNAP_CCOW, SNAP_PRECOPY_EAGER, SNAP_ARM_PROTECT, true, SNAP_CCOW,
		  SNAP_WRITE_BACKGROUND },
		{ SNAP_CCOW, SNAP_PRECOPY_ROUNDS, SNAP_ARM_ROUNDS, true, SNAP_COW, SNAP_WRITE_ROUNDS },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct snap_request r = { .policy = cases[i].policy, .precopy = cases[i].precopy };
		struct snap_mode m = snap_mode_of(&r);

		ck_assert_int_eq(m.arm, cases[i].arm);
		ck_assert_int_eq(m.pause_copies, cases[i].pause_copies);
		ck_assert_int_eq(m.plan, cases[i].plan);
		ck_assert_int_eq(m.write, cases[i].write);
	}
}
END_TEST

START_TEST(test_request_table)
{
	const struct snap_field *f;
	struct snap_request r = { 0 };
	char a[256], b[256];
	struct cli_opts o;

	for (int i = 0; (f = snap_field_at(i)); i++) {
		char name[64];
		bool found = false;

		snprintf(name, sizeof(name), "snapshot-%s", f->key);
		for (int k = 0; opt_name(k, NULL); k++)
			found = found || strcmp(opt_name(k, NULL), name) == 0;
		ck_assert_msg(found == f->run, "--%s: %s", name, f->run ? "not in run" : "in run");
		ck_assert_ptr_eq(snap_field_find(name), f);
		ck_assert_ptr_eq(snap_field_find(f->key), f);
	}
	ck_assert_ptr_null(snap_field_find("snapshot-every"));
	f = snap_field_find("threads");
	ck_assert_int_eq(snap_field_set(&r, f, "snapshot-", "99", a, sizeof(a)), -EINVAL);
	ck_assert_int_eq(snap_field_set(&r, f, "", "99", b, sizeof(b)), -EINVAL);
	ck_assert_str_eq(a, "--snapshot-threads 99: from 1 to 16, an integer");
	ck_assert_str_eq(strchr(a, ':'), strchr(b, ':'));
	ck_assert_int_eq(r.threads, 0); /* a bad value leaves the request as it was */
	ck_assert_int_eq(snap_field_set(&r, f, "", "3", b, sizeof(b)), 0);
	ck_assert_int_eq(r.threads, 3);
	ck_assert_int_eq(snap_field_set(&r, snap_field_find("rate"), "", "2.5", b, sizeof(b)), 0);
	ck_assert_uint_eq(r.rate, 2500000);
	ck_assert_int_eq(snap_field_set(&r, snap_field_find("track"), "", NULL, b, sizeof(b)), 0);
	ck_assert(r.track);
	ck_assert_int_eq(snap_field_set(&r, snap_field_find("track"), "", "yes", b, sizeof(b)),
			 -EINVAL);
	ck_assert_int_eq(snap_field_set(&r, snap_field_find("threshold"), "", NULL, b, sizeof(b)),
			 -EINVAL);
	ck_assert_int_eq(snap_field_set(&r, snap_field_find("threshold"), "", "nan", b, sizeof(b)),
			 -EINVAL);
	ck_assert_int_eq(snap_field_set(&r, snap_field_find("compress-level"), "", "0", b,
					sizeof(b)), -EINVAL);
	ck_assert_int_eq(parse_line(OPT_RUN, "run --snapshot-precopy eager --precopy lazy "
				    "--snapshot-pause-budget-ms 20 -- /bin/true", &o), 0);
	ck_assert_int_eq(o.sched.req.precopy, SNAP_PRECOPY_LAZY);
	ck_assert_double_eq(o.sched.req.pause_budget_ms, 20);
	ck_assert_int_ne(parse_line(OPT_RUN, "run --snapshot-threads 99 -- /bin/true", &o), 0);
	ck_assert_ptr_nonnull(strstr(snap_fields_synopsis(), "[--track]"));
}
END_TEST

/* ccvm.1 and the option table agree: every option is in the man page's OPTIONS, marked
 * (run) or (restore) when only one command takes it, and the page names no option of
 * run or restore that the table lacks. */
START_TEST(test_man_page_matches)
{
	FILE *f = fopen("ccvm.1", "r");
	static char text[65536];
	char *opts, *end;
	size_t n;

	ck_assert_msg(f, "ccvm.1 not found (run the unit tests from the top directory)");
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	opts = strstr(text, "\n.SH OPTIONS");
	ck_assert_ptr_nonnull(opts);
	end = strstr(opts + 1, "\n.SH ");
	ck_assert_ptr_nonnull(end);
	*end = '\0';
	for (int i = 0; opt_name(i, NULL); i++) {
		unsigned cmds;
		const char *name = opt_name(i, &cmds);
		char *entry;

		ck_assert_msg(man_has(opts, name), "--%s is not in ccvm.1", name);
		entry = strstr(opts, ".TP\n.B");
		for (; entry; entry = strstr(entry + 1, ".TP\n")) {
			char *eol = strchr(entry + 4, '\n');
			char line[256];

			snprintf(line, sizeof(line), "%.*s", (int)(eol - entry), entry);
			if (!man_has(line, name))
				continue;
			if (cmds == OPT_RUN)
				ck_assert_msg(strncmp(eol + 1, "(run)", 5) == 0, "--%s: not marked (run)", name);
			else if (cmds == OPT_RESTORE)
				ck_assert_msg(strncmp(eol + 1, "(restore)", 9) == 0,
					      "--%s: not marked (restore)", name);
			else
				ck_assert_msg(eol[1] != '(', "--%s: marked for one command", name);
			break;
		}
	}
	for (char *at = strstr(opts, "\\-\\-"); at; at = strstr(at + 4, "\\-\\-")) {
		char name[64];
		int k = 0;
		bool known = false;

		for (char *c = at + 4; k < 63 && ((*c >= 'a' && *c <= 'z') || *c == '\\');) {
			if (c[0] == '\\' && c[1] == '-') {
				name[k++] = '-';
				c += 2;
			} else if (*c == '\\') {
				break;
			} else {
				name[k++] = *c++;
			}
		}
		name[k] = '\0';
		for (int i = 0; opt_name(i, NULL); i++)
			known = known || strcmp(opt_name(i, NULL), name) == 0;
		ck_assert_msg(known, "ccvm.1 names --%s, which no command takes", name);
	}
}
END_TEST

/* Migration addresses: IPv4 and bracketed IPv6; tcp: only with --insecure, and then on
 * loopback only; unix: always. */
START_TEST(test_migration_channels)
{
	static const char *const bad[] = { "tcp:", "tcp:1.2.3.4", "tcp:1.2.3.4:", "tcp::80",
					   "tcp:1.2.3.4:0", "tcp:1.2.3.4:65536", "tcp:[::1:80",
					   "tcp:::1:80", "tcp:[]:80", "tcp:[1.2.3.4]:80",
					   "tcp:localhost:80", "unix:", "udp:1.2.3.4:5" };
	struct sockaddr_storage ss;
	char host[64];
	socklen_t sl;
	char err[256];

	ck_assert_int_eq(migrate_addr("tcp:[::1]:4444", &ss, &sl, err, sizeof(err)), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET6);
	ck_assert_uint_eq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 4444);
	ck_assert_int_eq(migrate_addr("tcp:127.0.0.1:80", &ss, &sl, err, sizeof(err)), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(migrate_addr(bad[i], &ss, &sl, err, sizeof(err)) == -EINVAL,
			      "%s taken", bad[i]);
	ck_assert_int_eq(migrate_channel_check("unix:/tmp/x.sock", false, false, err, sizeof(err)), 0);
	ck_assert_int_eq(migrate_channel_check("tcp:127.0.0.1:80", false, false, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "--insecure"));
	ck_assert_int_eq(migrate_channel_check("tcp:127.0.0.1:80", true, false, err, sizeof(err)), 0);
	ck_assert_int_eq(migrate_channel_check("tcp:127.9.9.9:80", true, false, err, sizeof(err)), 0);
	ck_assert_int_eq(migrate_channel_check("tcp:[::1]:80", true, false, err, sizeof(err)), 0);
	ck_assert_int_eq(migrate_channel_check("tcp:[::ffff:127.0.0.1]:80", true, false, err, sizeof(err)), 0);
	ck_assert_int_eq(migrate_channel_check("tcp:0.0.0.0:80", true, false, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "loopback addresses only"));
	ck_assert_int_eq(migrate_channel_check("tcp:10.0.0.1:80", true, false, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(migrate_channel_check("tcp:[::]:80", true, false, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(migrate_channel_check("tcp:[fe80::1]:80", true, false, err, sizeof(err)), -EPERM);
	/* With TLS, any address; TLS and --insecure together are a mistake. */
	ck_assert_int_eq(migrate_channel_check("tcp:0.0.0.0:80", false, true, err, sizeof(err)), 0);
	ck_assert_int_eq(migrate_channel_check("tcp:10.0.0.1:80", false, true, err, sizeof(err)), 0);
	ck_assert_int_eq(migrate_channel_check("tcp:127.0.0.1:80", true, true, err, sizeof(err)), -EINVAL);
	migrate_host("tcp:[::1]:80", host, sizeof(host));
	ck_assert_str_eq(host, "::1");
	migrate_host("tcp:10.1.2.3:80", host, sizeof(host));
	ck_assert_str_eq(host, "10.1.2.3");
	migrate_host("unix:/x", host, sizeof(host));
	ck_assert_str_eq(host, "");
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("sizes");

	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_bad_sizes);
	tcase_add_test(tc, test_reals);
	tcase_add_test(tc, test_option_table);
	tcase_add_test(tc, test_request_table);
	tcase_add_test(tc, test_snapshot_modes);
	tcase_add_test(tc, test_man_page_matches);
	tcase_add_test(tc, test_migration_channels);
	suite_add_tcase(s, tc);
	return s;
}
