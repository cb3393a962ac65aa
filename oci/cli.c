/*
 * cli.c - ccvm-oci's command line: runc's global flags, then a command.
 *
 * ccvm is one binary; started under the name ccvm-oci (the link `make install`
 * makes) it is an OCI runtime with runc's command line, as conmon (podman) and go-runc
 * (containerd's runc shim) call it (runtime-tools' command-line-interface.md). The
 * global flags come before the command; --log sends every message to a file too, as
 * plain lines or the JSON lines conmon and containerd read back.
 */
#include "oci.h"

#include "cmd.h"
#include "../base/log.h"
#include "../vmm/version.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define OCI_NAME "ccvm-oci"

static const struct {
	const char *name;
	int (*run)(const struct oci_global *g, int argc, char **argv);
	const char *usage;
} oci_cmds[] = {
	{ "create", oci_cmd_create, "create --bundle DIR [--pid-file F] [--console-socket S] ID" },
	{ "start", oci_cmd_start, "start ID" },
	{ "state", oci_cmd_state, "state ID" },
	{ "kill", oci_cmd_kill, "kill [--all] ID [SIGNAL]" },
	{ "delete", oci_cmd_delete, "delete [--force] ID" },
	{ "pause", oci_cmd_pause, "pause ID" },
	{ "resume", oci_cmd_resume, "resume ID" },
	{ "list", oci_cmd_list, "list [--format table|json] [--quiet]" },
	{ "ps", oci_cmd_ps, "ps [--format table|json] ID" },
	{ "features", oci_cmd_features, "features" },
	{ "checkpoint", oci_cmd_checkpoint, "checkpoint --image-path DIR [--work-path DIR] "
	  "[--leave-running] [--pre-dump] [--parent-path DIR] ID" },
	{ "exec", oci_cmd_exec, "exec [--process FILE | --env N=V... --cwd DIR --tty] [--detach] "
	  "[--pid-file F] [--console-socket S] ID [COMMAND [ARG...]]" },
	{ "restore", oci_cmd_restore, "restore --image-path DIR --bundle DIR [--pid-file F] "
	  "[--detach] [--console-socket S] ID" },
};

bool oci_invoked(const char *argv0)
{
	const char *base = strrchr(argv0, '/');

	return strcmp(base ? base + 1 : argv0, OCI_NAME) == 0;
}

static void oci_usage(FILE *out)
{
	fprintf(out, "usage: " OCI_NAME " [--root DIR] [--log FILE] [--log-format text|json] "
		"[--debug] [--systemd-cgroup] COMMAND [ARGS...]\n\n"
		"An OCI runtime with runc's command line: each container runs in a ccvm VM.\n\n");
	for (size_t i = 0; i < sizeof(oci_cmds) / sizeof(oci_cmds[0]); i++)
		fprintf(out, "  " OCI_NAME " %s\n", oci_cmds[i].usage);
	fprintf(out, "  " OCI_NAME " --version\n\n'man ccvm' (CCVM-OCI) and docs/oci.md say more.\n");
}

static int oci_version(void)
{
	printf(OCI_NAME " version %s\nspec: %s\n", CCVM_VERSION, OCI_SPEC_VERSION);
	return 0;
}

/* --log FILE: every message there too, from now on. */
static int oci_log_to(const char *path, const char *format)
{
	bool json = format && strcmp(format, "json") == 0;
	int fd;

	if (format && !json && strcmp(format, "text") != 0) {
		log_err("--log-format %s: text or json", format);
		return -EINVAL;
	}
	if (!path)
		return 0;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_err("--log %s: %s", path, strerror(errno));
		return -errno;
	}
	log_set_sink(fd, json);
	return 0;
}

/* The global flags; the index of the command. */
static int oci_globals(int argc, char **argv, struct oci_global *g, bool *version)
{
	const char *log = NULL, *format = NULL, *rootless = NULL, *criu = NULL;
	bool help = false;
	const struct oci_flag flags[] = {
		{ "root", NULL, &g->root, NULL },       { "log", NULL, &log, NULL },
		{ "log-format", NULL, &format, NULL },  { "debug", NULL, NULL, &g->debug },
		{ "systemd-cgroup", NULL, NULL, &g->systemd_cgroup },
		{ "rootless", NULL, &rootless, NULL },  { "criu", NULL, &criu, NULL },
		{ "version", "v", NULL, version },     { "help", "h", NULL, &help },
		{ NULL, NULL, NULL, NULL },
	};
	int i = oci_flags_prefix(OCI_NAME, argc - 1, argv + 1, flags) + 1;

	if (i <= 0)
		return -EINVAL;
	if (help)
		return 0;
	if (g->debug)
		log_set_level(LOG_DEBUG);
	if (rootless && strcmp(rootless, "false") != 0 && strcmp(rootless, "auto") != 0) {
		log_err("--rootless %s: ccvm-oci runs as root (false or auto)", rootless);
		return -EINVAL;
	}
	return oci_log_to(log, format) ? -EINVAL : i;
}

int oci_main(int argc, char **argv)
{
	struct oci_global g = { .root = OCI_DEFAULT_ROOT };
	bool version = false;
	int i;

	log_set_name(OCI_NAME);
	i = oci_globals(argc, argv, &g, &version);
	if (i < 0)
		return 1;
	if (version)
		return oci_version();
	if (i == 0 || i >= argc) {
		oci_usage(i == 0 ? stdout : stderr);
		return i == 0 ? 0 : 1;
	}
	for (size_t k = 0; k < sizeof(oci_cmds) / sizeof(oci_cmds[0]); k++) {
		if (strcmp(argv[i], oci_cmds[k].name) != 0)
			continue;
		if (i + 1 < argc && (strcmp(argv[i + 1], "--help") == 0 || strcmp(argv[i + 1], "-h") == 0)) {
			printf("usage: " OCI_NAME " %s\n", oci_cmds[k].usage);
			return 0;
		}
		return oci_cmds[k].run(&g, argc - i - 1, argv + i + 1);
	}
	log_err("unknown command '%s'", argv[i]);
	oci_usage(stderr);
	return 1;
}
