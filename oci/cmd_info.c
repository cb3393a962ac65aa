/*
 * cmd_info.c - what ccvm-oci tells without acting: list, ps and features.
 */
#include "cmd.h"

#include "../base/log.h"
#include "../vmm/version.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Every container under the root whose record reads, in directory order. */
static json_t *list_all(const struct oci_global *g)
{
	json_t *all = json_array();
	DIR *d = opendir(g->root);
	struct dirent *e;

	if (!all || !d) {
		if (d)
			closedir(d);
		return all;
	}
	while ((e = readdir(d))) {
		char err[256];
		struct oci_state st;

		if (!oci_id_ok(e->d_name) || oci_state_load(g->root, e->d_name, &st, err, sizeof(err)))
			continue;
		json_array_append_new(all, oci_state_json(&st));
		oci_state_free(&st);
	}
	closedir(d);
	return all;
}

int oci_cmd_list(const struct oci_global *g, int argc, char **argv)
{
	const char *format = "table", *pos[OCI_MAX_POS];
	bool quiet = false;
	const struct oci_flag flags[] = { { "format", "f", &format, NULL }, { "quiet", "q", NULL, &quiet },
					  { NULL, NULL, NULL, NULL } };
	json_t *all, *c;
	size_t i;

	if (oci_flags_parse("list", argc, argv, flags, pos) != 0)
		return 1;
	if (strcmp(format, "table") != 0 && strcmp(format, "json") != 0) {
		log_err("list --format %s: table or json", format);
		return 1;
	}
	all = list_all(g);
	if (!all)
		return 1;
	if (strcmp(format, "json") == 0) {
		json_dumpf(all, stdout, JSON_COMPACT);
		puts("");
	} else {
		if (!quiet)
			printf("%-24s %-8s %-10s %-40s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED");
		json_array_foreach(all, i, c) {
			if (quiet)
				printf("%s\n", json_string_value(json_object_get(c, "id")));
			else
				printf("%-24s %-8lld %-10s %-40s %s\n",
				       json_string_value(json_object_get(c, "id")),
				       (long long)json_integer_value(json_object_get(c, "pid")),
				       json_string_value(json_object_get(c, "status")),
				       json_string_value(json_object_get(c, "bundle")),
				       json_string_value(json_object_get(c, "created")));
		}
	}
	json_decref(all);
	return 0;
}

/* The host processes of a container: its monitor alone, since the guest's processes
 * are the monitor's vCPU threads, not host processes. */
int oci_cmd_ps(const struct oci_global *g, int argc, char **argv)
{
	const char *format = "table", *pos[OCI_MAX_POS];
	const struct oci_flag flags[] = { { "format", "f", &format, NULL }, { NULL, NULL, NULL, NULL } };
	int n = oci_flags_parse("ps", argc, argv, flags, pos);
	struct oci_state st;
	bool live;

	if (n < 1) {
		if (n == 0)
			log_err("usage: ccvm-oci ps [--format table|json] ID");
		return 1;
	}
	if (oci_load(g, pos[0], &st))
		return 1;
	live = oci_state_status(&st) != OCI_STOPPED;
	if (strcmp(format, "json") == 0) {
		if (live)
			printf("[%d]\n", (int)st.pid);
		else
			printf("[]\n");
	} else {
		printf("PID\n");
		if (live)
			printf("%d\n", (int)st.pid);
	}
	oci_state_free(&st);
	return 0;
}

/* runtime-spec's features.md: what this runtime honours, for callers that ask; the
 * seccomp actions and operators are the personality's (vmm/linux/sysfilter.c). */
int oci_cmd_features(const struct oci_global *g, int argc, char **argv)
{
	const struct oci_flag flags[] = { { NULL, NULL, NULL, NULL } };
	const char *pos[OCI_MAX_POS];
	json_t *j;

	(void)g;
	if (oci_flags_parse("features", argc, argv, flags, pos) != 0)
		return 1;
	j = json_pack("{s:s, s:s, s:[], s:[sssssssssssssssss],"
		      " s:{s:[ssssss], s:[], s:{s:b, s:b, s:b, s:b}, s:{s:b, s:[ssssssss],"
		      " s:[sssssss], s:[s]}, s:{s:b}, s:{s:b}},"
		      " s:{s:s}}",
		      "ociVersionMin", "1.0.0", "ociVersionMax", OCI_SPEC_VERSION, "hooks",
		      "mountOptions", "bind", "rbind", "ro", "rw", "nosuid", "suid", "nodev", "dev",
		      "noexec", "exec", "noatime", "atime", "relatime", "norelatime", "strictatime",
		      "nodiratime", "private",
		      "linux", "namespaces", "mount", "network", "uts", "ipc", "cgroup", "pid",
		      "capabilities", "cgroup", "v1", 1, "v2", 1, "systemd", 0, "systemdUser", 0,
		      "seccomp", "enabled", 1, "actions", "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO",
		      "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
		      "SCMP_ACT_TRACE", "SCMP_ACT_TRAP", "operators", "SCMP_CMP_EQ", "SCMP_CMP_GE",
		      "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE",
		      "archs", "SCMP_ARCH_X86_64", "apparmor", "enabled", 0, "selinux", "enabled", 0,
		      "annotations", "io.ccvm.version", CCVM_VERSION);
	if (!j)
		return 1;
	json_dumpf(j, stdout, JSON_INDENT(2));
	puts("");
	json_decref(j);
	return 0;
}
