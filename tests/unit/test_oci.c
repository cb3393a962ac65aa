/*
 * test_oci.c - ccvm-oci's checks without a VM: config.json read whole and refused by
 * field, the guest's seccomp profile, resource limits by name, container records.
 */
#include "suites.h"
#include "../../oci/cmd.h"
#include "../../oci/config.h"
#include "../../oci/state.h"
#include "../../vmm/linux/rlimit.h"
#include "../../vmm/linux/sysfilter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A config as podman writes it, trimmed: root "/" so that root.path checks pass. */
static const char *base_config =
	"{\"ociVersion\":\"1.0.2-dev\","
	"\"process\":{\"user\":{\"uid\":0,\"gid\":0,\"umask\":18},\"args\":[\"/bin/sh\",\"-c\",\"true\"],"
	"\"env\":[\"PATH=/bin\",\"TERM=xterm\"],\"cwd\":\"/\",\"capabilities\":{\"bounding\":[\"CAP_KILL\"]},"
	"\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"hard\":1048576,\"soft\":1048576},"
	"{\"type\":\"RLIMIT_NPROC\",\"hard\":4096,\"soft\":1024}]},"
	"\"root\":{\"path\":\"/\"},\"hostname\":\"c1\","
	"\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
	"{\"destination\":\"/dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"nosuid\",\"mode=755\",\"size=65536k\"]},"
	"{\"destination\":\"/etc/hosts\",\"type\":\"bind\",\"source\":\"/etc/hosts\",\"options\":[\"bind\",\"rprivate\",\"ro\"]}],"
	"\"annotations\":{\"io.ccvm.snapshot-policy\":\"ccow\"},"
	"\"linux\":{\"sysctl\":{\"net.ipv4.ping_group_range\":\"0 0\"},"
	"\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}],\"pids\":{\"limit\":2048},"
	"\"memory\":{\"limit\":536870912}},"
	"\"cgroupsPath\":\"/libpod_parent/libpod-x\","
	"\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\",\"path\":\"/run/netns/n1\"},"
	"{\"type\":\"ipc\"},{\"type\":\"uts\"},{\"type\":\"mount\"}],"
	"\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[]},"
	"\"maskedPaths\":[\"/proc/kcore\"],\"readonlyPaths\":[\"/proc/sys\"]}}";

/* base_config with @path (dotted, as "linux.devices") set to the JSON @value, parsed. */
static int parse_with(const char *path, const char *value, struct oci_config *c, char *err,
		      size_t len)
{
	json_t *doc = json_loads(base_config, 0, NULL), *obj = doc, *v;
	char key[128], *dot, *text;
	int rc;

	ck_assert_ptr_nonnull(doc);
	if (path) {
		snprintf(key, sizeof(key), "%s", path);
		char *k = key;

		while ((dot = strchr(k, '.'))) {
			*dot = '\0';
			if (!json_object_get(obj, k))
				json_object_set_new(obj, k, json_object());
			obj = json_object_get(obj, k);
			k = dot + 1;
		}
		v = json_loads(value, JSON_DECODE_ANY, NULL);
		ck_assert_msg(v != NULL, "bad test value %s", value);
		json_object_set_new(obj, k, v);
	}
	text = json_dumps(doc, 0);
	json_decref(doc);
	rc = oci_config_parse(text, strlen(text), "/tmp", c, err, len);
	free(text);
	return rc;
}

/* podman's config is read whole: the fields ccvm honours come out as given. */
START_TEST(test_config_podman)
{
	struct oci_config c;
	char err[512] = "";

	ck_assert_msg(parse_with(NULL, NULL, &c, err, sizeof(err)) == 0, "refused: %s", err);
	ck_assert_uint_eq(c.n_args, 3);
	ck_assert_str_eq(c.args[2], "true");
	ck_assert_ptr_null(c.args[3]);
	ck_assert_uint_eq(c.n_env, 2);
	ck_assert_str_eq(c.cwd, "/");
	ck_assert(c.umask_set && c.umask == 022);
	ck_assert(c.rlimits.set & (1u << RLIMIT_NOFILE));
	ck_assert_uint_eq(c.rlimits.rlim[RLIMIT_NPROC].rlim_cur, 1024);
	ck_assert_uint_eq(c.rlimits.rlim[RLIMIT_NPROC].rlim_max, 4096);
	ck_assert_uint_eq(c.n_mounts, 3);
	ck_assert_int_eq(c.mounts[0].kind, OCI_MOUNT_VIRTUAL);
	ck_assert_int_eq(c.mounts[1].kind, OCI_MOUNT_TMPFS);
	ck_assert_str_eq(c.mounts[1].data, "mode=755,size=65536k");
	ck_assert_int_eq(c.mounts[2].kind, OCI_MOUNT_BIND);
	ck_assert(c.mounts[2].ro);
	ck_assert_str_eq(c.netns_path, "/run/netns/n1");
	ck_assert(c.ns_net && c.ns_uts && c.ns_ipc);
	ck_assert_str_eq(c.cgroups_path, "/libpod_parent/libpod-x");
	ck_assert_int_eq(c.mem_limit, 536870912);
	ck_assert_int_eq(c.pids_limit, 2048);
	ck_assert_uint_eq(c.n_sysctls, 1);
	ck_assert_ptr_nonnull(c.seccomp);
	ck_assert_uint_eq(c.n_ccvm_opts, 1);
	ck_assert_str_eq(c.ccvm_opts[0].name, "snapshot-policy");
	ck_assert_str_eq(c.ccvm_opts[0].value, "ccow");
	ck_assert_str_eq(c.hostname, "c1");
	oci_config_free(&c);
}
END_TEST

/* What ccvm cannot honour is refused with the field's name, never dropped. */
START_TEST(test_config_refusals)
{
	static const struct {
		const char *path, *value, *names;
	} cases[] = {
		{ "linux.devices", "[{\"path\":\"/dev/fuse\",\"type\":\"c\",\"major\":10,\"minor\":229}]",
		  "linux.devices[0] (/dev/fuse)" },
		{ "linux.uidMappings", "[{\"containerID\":0,\"hostID\":1000,\"size\":1}]", "linux.uidMappings" },
		{ "linux.namespaces", "[{\"type\":\"user\"}]", "linux.namespaces[0] (user)" },
		{ "mounts", "[{\"destination\":\"/mnt\",\"type\":\"nfs\",\"source\":\"h:/x\"}]",
		  "mounts[0] (/mnt)" },
		{ "mounts", "[{\"destination\":\"/mnt\",\"type\":\"bind\",\"source\":\"/x\",\"options\":[\"idmap\"]}]",
		  "mounts[0] (/mnt)" },
		{ "hooks", "{\"prestart\":[{\"path\":\"/bin/true\"}]}", "hooks" },
		{ "process.rlimits", "[{\"type\":\"RLIMIT_BOGUS\",\"soft\":1,\"hard\":1}]", "process.rlimits[0]" },
		{ "process.rlimits", "[{\"type\":\"RLIMIT_NOFILE\",\"soft\":2,\"hard\":1}]", "process.rlimits[0]" },
		{ "process.cwd", "\"relative\"", "process.cwd" },
		{ "process.args", "[]", "process.args" },
		{ "linux.sysctl", "{\"kernel.panic\":\"1\"}", "linux.sysctl" },
		{ "linux.resources.blockIO", "{\"weight\":10}", "linux.resources.blockIO" },
		{ "ociVersion", "\"2.0.0\"", "ociVersion" },
		{ "annotations", "{\"io.ccvm.bogus\":\"1\"}", "annotations" },
		{ "annotations", "{\"io.ccvm.snapshot-threads\":\"99\"}", "io.ccvm.snapshot-threads 99" },
		{ "annotations", "{\"io.ccvm.snapshot-dir\":\"/tmp\"}", "annotations" },
		{ "root", "{\"path\":\"/nonexistent-root-dir\"}", "root.path" },
		{ "linux.namespaces", "[{\"type\":\"mount\"},{\"type\":\"network\"}]", "hostname" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct oci_config c;
		char err[512] = "";

		ck_assert_msg(parse_with(cases[i].path, cases[i].value, &c, err, sizeof(err)) == -EINVAL,
			      "%s=%s accepted", cases[i].path, cases[i].value);
		ck_assert_msg(strstr(err, cases[i].names) != NULL, "%s: message '%s' does not name '%s'",
			      cases[i].path, err, cases[i].names);
	}
}
END_TEST

/* Not JSON, duplicate keys, wrong types: errors, never a crash. */
START_TEST(test_config_garbage)
{
	static const char *const bad[] = { "", "{", "[]", "null", "{\"ociVersion\":1}",
					   "{\"ociVersion\":\"1.0\",\"ociVersion\":\"1.0\"}",
					   "{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"/\"},\"process\":7}" };
	struct oci_config c;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(oci_config_parse(bad[i], strlen(bad[i]), "/", &c, err, sizeof(err)) < 0,
			      "'%s' accepted", bad[i]);
}
END_TEST

/* An exec's process file (runc exec --process: config.json's process object, as
 * conmon writes it) is read with the same checks; what is wrong is named. */
START_TEST(test_exec_process)
{
	static const char good[] =
		"{\"terminal\":false,\"user\":{\"uid\":0,\"gid\":0},\"args\":[\"sh\",\"-c\","
		"\"exit 5\"],\"env\":[\"PATH=/bin\",\"TERM=xterm\"],\"cwd\":\"/tmp\","
		"\"capabilities\":{\"bounding\":[\"CAP_CHOWN\"]},\"noNewPrivileges\":false}";
	static const struct {
		const char *text, *names;
	} bad[] = {
		{ "{\"args\":[],\"cwd\":\"/\"}", "process.args" },
		{ "{\"args\":[\"sh\"],\"env\":[\"NOEQ\"]}", "process.env" },
		{ "{\"args\":[\"sh\"]}", "process.cwd" },
		{ "{\"args\":[\"sh\"],\"cwd\":\"tmp\"}", "process.cwd" },
		{ "{\"args\":[\"sh\"],\"cwd\":\"/\",\"user\":{\"uid\":-1,\"gid\":0}}", "process.user.uid" },
		{ "{\"args\":[\"sh\"],\"cwd\":\"/\",\"ioPriority\":{\"class\":\"IOPRIO_CLASS_RT\"}}", "ioPriority" },
		{ "[]", "process" },
		{ "{", "line 1" },
	};
	struct oci_config c;
	char err[512] = "";

	ck_assert_int_eq(oci_process_parse(good, strlen(good), &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.n_args, 3);
	ck_assert_str_eq(c.args[2], "exit 5");
	ck_assert_uint_eq(c.n_env, 2);
	ck_assert_str_eq(c.cwd, "/tmp");
	ck_assert(!c.terminal);
	oci_config_free(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_msg(oci_process_parse(bad[i].text, strlen(bad[i].text), &c, err, sizeof(err)) < 0,
			      "'%s' accepted", bad[i].text);
		ck_assert_msg(strstr(err, bad[i].names) != NULL, "'%s': message '%s' does not name '%s'",
			      bad[i].text, err, bad[i].names);
	}
}
END_TEST

static int load_filter(const char *text, struct lx_filter *f)
{
	char err[256] = "";
	json_t *j = json_loads(text, 0, NULL);
	int rc;

	ck_assert_ptr_nonnull(j);
	rc = lx_filter_parse(j, f, err, sizeof(err));
	json_decref(j);
	return rc;
}

/* The profile's verdicts: the default, a per-call errno, argument conditions, the
 * strongest action winning, two conditions on one argument either holding. */
START_TEST(test_filter_verdicts)
{
	struct lx_filter f;
	uint64_t a[6] = { 0 };
	struct lx_filter_verdict v;

	ck_assert_int_eq(load_filter(
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":38,\"syscalls\":["
		"{\"names\":[\"read\",\"write\",\"no_such_call\"],\"action\":\"SCMP_ACT_ALLOW\"},"
		"{\"names\":[\"mkdir\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1},"
		"{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":22,\"args\":["
		"{\"index\":0,\"value\":16,\"op\":\"SCMP_CMP_EQ\"},{\"index\":2,\"value\":9,\"op\":\"SCMP_CMP_EQ\"}]},"
		"{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":16,\"op\":\"SCMP_CMP_NE\"}]},"
		"{\"names\":[\"personality\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":["
		"{\"index\":0,\"value\":0,\"op\":\"SCMP_CMP_EQ\"},{\"index\":0,\"value\":8,\"op\":\"SCMP_CMP_EQ\"}]},"
		"{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":1,\"value\":65280,\"valueTwo\":21504,\"op\":\"SCMP_CMP_MASKED_EQ\"}]},"
		"{\"names\":[\"sync\"],\"action\":\"SCMP_ACT_KILL\"},{\"names\":[\"sync\"],\"action\":\"SCMP_ACT_ALLOW\"}]}",
		&f), 0);
	ck_assert_uint_eq(f.n_unknown, 1);
	v = lx_filter_check(&f, __NR_read, a);
	ck_assert_int_eq(v.act, LX_FA_ALLOW);
	v = lx_filter_check(&f, __NR_getpid, a);
	ck_assert(v.act == LX_FA_ERRNO && v.err == 38);
	v = lx_filter_check(&f, __NR_mkdir, a);
	ck_assert(v.act == LX_FA_ERRNO && v.err == 1);
	a[0] = 16, a[2] = 9;
	v = lx_filter_check(&f, __NR_socket, a);
	ck_assert(v.act == LX_FA_ERRNO && v.err == 22);
	a[0] = 2;
	ck_assert_int_eq(lx_filter_check(&f, __NR_socket, a).act, LX_FA_ALLOW);
	a[0] = 8;
	ck_assert_int_eq(lx_filter_check(&f, __NR_personality, a).act, LX_FA_ALLOW);
	a[0] = 0;
	ck_assert_int_eq(lx_filter_check(&f, __NR_personality, a).act, LX_FA_ALLOW);
	a[0] = 3;
	ck_assert_int_eq(lx_filter_check(&f, __NR_personality, a).act, LX_FA_ERRNO);
	a[1] = 0x5401;
	ck_assert_int_eq(lx_filter_check(&f, __NR_ioctl, a).act, LX_FA_ALLOW);
	a[1] = 0x8901;
	ck_assert_int_eq(lx_filter_check(&f, __NR_ioctl, a).act, LX_FA_ERRNO);
	ck_assert_int_eq(lx_filter_check(&f, __NR_sync, a).act, LX_FA_KILL);
	ck_assert(lx_filter_allows_all(&f, __NR_read));
	ck_assert(!lx_filter_allows_all(&f, __NR_socket));
	ck_assert(!lx_filter_allows_all(&f, __NR_getpid));
	ck_assert_int_eq(lx_filter_check(&f, 100000, a).act, LX_FA_ERRNO);
	lx_filter_free(&f);
}
END_TEST

/* Profiles ccvm cannot honour are refused, naming the field. */
START_TEST(test_filter_refusals)
{
	static const char *const bad[] = {
		"{\"defaultAction\":\"SCMP_ACT_NOTIFY\"}",
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":[\"SCMP_ARCH_AARCH64\"]}",
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"flags\":[\"SECCOMP_FILTER_FLAG_BOGUS\"]}",
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_MAYBE\"}]}",
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\","
		"\"args\":[{\"index\":6,\"value\":0,\"op\":\"SCMP_CMP_EQ\"}]}]}",
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\","
		"\"args\":[{\"index\":0,\"value\":0,\"op\":\"SCMP_CMP_SOMETIMES\"}]}]}",
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":-1}",
		"{}",
	};
	struct lx_filter f;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(load_filter(bad[i], &f) == -EINVAL, "'%s' accepted", bad[i]);
}
END_TEST

/* --rlimit and process.rlimits name limits the same way. */
START_TEST(test_rlimit_names)
{
	struct lx_rlimits l = { .set = 0 };
	char err[128];

	ck_assert_int_eq(lx_rlimit_by_name("nofile"), RLIMIT_NOFILE);
	ck_assert_int_eq(lx_rlimit_by_name("RLIMIT_NPROC"), RLIMIT_NPROC);
	ck_assert_int_eq(lx_rlimit_by_name("RLIMIT_"), -EINVAL);
	ck_assert_int_eq(lx_rlimit_parse("nofile=100:200", &l, err, sizeof(err)), 0);
	ck_assert_uint_eq(l.rlim[RLIMIT_NOFILE].rlim_cur, 100);
	ck_assert_uint_eq(l.rlim[RLIMIT_NOFILE].rlim_max, 200);
	ck_assert_int_eq(lx_rlimit_parse("core=unlimited", &l, err, sizeof(err)), 0);
	ck_assert(l.rlim[RLIMIT_CORE].rlim_max == RLIM_INFINITY);
	ck_assert_int_eq(lx_rlimit_parse("nofile=3:2", &l, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(lx_rlimit_parse("nofile=-1", &l, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(lx_rlimit_parse("bogus=1", &l, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(lx_rlimit_parse("nofile", &l, err, sizeof(err)), -EINVAL);
}
END_TEST

/* IDs as runc takes them; a process's start time tells a live one from one gone. */
START_TEST(test_state_ids_and_status)
{
	struct oci_state st = { .pid = 0 };
	pid_t child;

	ck_assert(oci_id_ok("d7308f6ee10a_x-1.2"));
	ck_assert(!oci_id_ok(""));
	ck_assert(!oci_id_ok("../x"));
	ck_assert(!oci_id_ok(".hidden"));
	ck_assert(!oci_id_ok("a/b"));
	ck_assert_uint_ne(oci_proc_start(getpid()), 0);
	child = fork();
	if (child == 0)
		_exit(0);
	st.pid = child;
	st.start = oci_proc_start(child);
	snprintf(st.dir, sizeof(st.dir), "/nonexistent");
	waitpid(child, NULL, 0);
	ck_assert_int_eq(oci_state_status(&st), OCI_STOPPED);
	st.pid = getpid();
	st.start = oci_proc_start(getpid());
	ck_assert_int_eq(oci_state_status(&st), OCI_RUNNING);
	st.paused = true;
	ck_assert_int_eq(oci_state_status(&st), OCI_PAUSED);
}
END_TEST

/* A record whose create died before it had a process (pid 0, "creating"): kill says
 * so, and delete --force removes it, neither signalling pid 0, which is this process's
 * own group. */
START_TEST(test_creating_record)
{
	char root[] = "/tmp/ccvm-oci-unit.XXXXXX", dir[PATH_MAX], path[PATH_MAX + 16];
	struct oci_global g = { .root = root };
	char *kill_args[] = { "c1", "KILL", NULL }, *del_args[] = { "--force", "c1", NULL };
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/c1", root);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/state.json", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"id\":\"c1\",\"pid\":0,\"start\":0,\"bundle\":\"/\",\"rootfs\":\"/\","
	      "\"created\":\"2026-12-06T00:00:00Z\",\"paused\":false}", f);
	fclose(f);
	ck_assert_int_eq(oci_cmd_kill(&g, 2, kill_args), 1);
	ck_assert_int_eq(oci_cmd_delete(&g, 2, del_args), 0);
	ck_assert_int_eq(access(dir, F_OK), -1);
	rmdir(root);
}
END_TEST

Suite *oci_suite(void)
{
	Suite *s = suite_create("oci");
	TCase *tc = tcase_create("oci");

	tcase_add_test(tc, test_config_podman);
	tcase_add_test(tc, test_config_refusals);
	tcase_add_test(tc, test_config_garbage);
	tcase_add_test(tc, test_exec_process);
	tcase_add_test(tc, test_filter_verdicts);
	tcase_add_test(tc, test_filter_refusals);
	tcase_add_test(tc, test_rlimit_names);
	tcase_add_test(tc, test_state_ids_and_status);
	tcase_add_test(tc, test_creating_record);
	suite_add_tcase(s, tc);
	return s;
}
