/*
 * config.c - an OCI bundle's config.json, read whole and checked.
 *
 * The file is written by podman, containerd or anyone, so it is hostile input: it is
 * read once, bounded in size, parsed with jansson and every field ccvm-oci uses is
 * checked and copied into struct oci_config before anything is built. Fields the
 * runtime spec marks optional and ccvm cannot honour are refused with the field's
 * name; unknown fields are ignored, as the spec requires. Here: the top level, root,
 * process and annotations; linux.* in config_linux.c, mounts in config_mount.c.
 */
#include "config_impl.h"

#include "../base/log.h"
#include "../snapshot/request.h"
#include "../vmm/linux/rlimit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OCI_ANNOTATION_PREFIX "io.ccvm."

/* process.user: uid, gid, umask, additionalGids. */
static int cfg_user(json_t *u, struct oci_config *c, char *err, size_t len)
{
	json_t *gids = json_object_get(u, "additionalGids");
	int64_t v;
	int rc;

	if (!json_is_object(u))
		return cfg_refuse(err, len, "process.user", "expected an object with uid and gid");
	if ((rc = cfg_int(json_object_get(u, "uid"), "process.user.uid", 0, UINT32_MAX - 1, &v, err, len)))
		return rc;
	c->uid = (uint32_t)v;
	if ((rc = cfg_int(json_object_get(u, "gid"), "process.user.gid", 0, UINT32_MAX - 1, &v, err, len)))
		return rc;
	c->gid = (uint32_t)v;
	if (json_object_get(u, "umask")) {
		if ((rc = cfg_int(json_object_get(u, "umask"), "process.user.umask", 0, 0777, &v, err, len)))
			return rc;
		c->umask_set = true;
		c->umask = (mode_t)v;
	}
	if (gids && !json_is_array(gids))
		return cfg_refuse(err, len, "process.user.additionalGids", "expected an array");
	if (json_array_size(gids) > OCI_MAX_LIST)
		return cfg_refuse(err, len, "process.user.additionalGids", "too many");
	c->gids = calloc(json_array_size(gids) + 1, sizeof(gid_t));
	if (!c->gids)
		return -ENOMEM;
	for (size_t i = 0; i < json_array_size(gids); i++) {
		if ((rc = cfg_int(json_array_get(gids, i), "process.user.additionalGids", 0,
				  UINT32_MAX - 1, &v, err, len)))
			return rc;
		c->gids[c->n_gids++] = (gid_t)v;
	}
	return 0;
}

/* process.rlimits: the guest's own limits (vmm/linux/rlimit.c), never the monitor's. */
static int cfg_rlimits(json_t *v, struct oci_config *c, char *err, size_t len)
{
	char field[64];
	json_t *r;
	size_t i;

	if (v && !json_is_array(v))
		return cfg_refuse(err, len, "process.rlimits", "expected an array");
	json_array_foreach(v, i, r) {
		const char *type = json_string_value(json_object_get(r, "type"));
		int64_t soft, hard;
		int res, rc;

		snprintf(field, sizeof(field), "process.rlimits[%zu]", i);
		res = type ? lx_rlimit_by_name(type) : -EINVAL;
		if (res < 0 || strncmp(type, "RLIMIT_", 7) != 0)
			return cfg_refuse(err, len, field, "type '%s' is no RLIMIT_* Linux knows",
					  type ? type : "(none)");
		if ((rc = cfg_int(json_object_get(r, "soft"), field, 0, INT64_MAX, &soft, err, len)) ||
		    (rc = cfg_int(json_object_get(r, "hard"), field, 0, INT64_MAX, &hard, err, len)))
			return rc;
		if (soft > hard)
			return cfg_refuse(err, len, field, "soft %lld is above hard %lld",
					  (long long)soft, (long long)hard);
		c->rlimits.rlim[res].rlim_cur = (rlim_t)soft;
		c->rlimits.rlim[res].rlim_max = (rlim_t)hard;
		c->rlimits.set |= 1u << res;
	}
	return 0;
}

/* process.* fields that ccvm cannot honour, each refused by name. */
static const struct cfg_refusal process_refused[] = {
	{ "commandLine", "a Windows field" },
	{ "ioPriority", "I/O priorities are not set for a VM" },
	{ "scheduler", "scheduling policies are not set for a VM" },
	{ "execCPUAffinity", "CPU affinity is set through linux.resources.cpu.cpus" },
	{ NULL, NULL },
};

static int cfg_process(json_t *p, struct oci_config *c, char *err, size_t len)
{
	int64_t v;
	int rc;

	if (!json_is_object(p))
		return cfg_refuse(err, len, "process", "required, an object");
	if ((rc = cfg_refused(p, "process", process_refused, err, len)))
		return rc;
	if ((rc = cfg_strings(json_object_get(p, "args"), "process.args", &c->args, &c->n_args, err, len)))
		return rc;
	if (!c->n_args || !c->args[0][0])
		return cfg_refuse(err, len, "process.args", "required: the program and its arguments");
	if ((rc = cfg_strings(json_object_get(p, "env"), "process.env", &c->env, &c->n_env, err, len)))
		return rc;
	for (size_t i = 0; i < c->n_env; i++)
		if (!strchr(c->env[i], '='))
			return cfg_refuse(err, len, "process.env", "'%s' is not NAME=VALUE", c->env[i]);
	if ((rc = cfg_abs_path(json_object_get(p, "cwd"), "process.cwd", &c->cwd, err, len)))
		return rc;
	if ((rc = cfg_bool(json_object_get(p, "terminal"), "process.terminal", &c->terminal, err, len)))
		return rc;
	if ((rc = cfg_user(json_object_get(p, "user"), c, err, len)))
		return rc;
	if ((rc = cfg_rlimits(json_object_get(p, "rlimits"), c, err, len)))
		return rc;
	if (json_object_get(p, "oomScoreAdj")) {
		if ((rc = cfg_int(json_object_get(p, "oomScoreAdj"), "process.oomScoreAdj", -1000,
				  1000, &v, err, len)))
			return rc;
		c->oom_set = true;
		c->oom_score_adj = (int)v;
	}
	return 0;
}

/* root: the rootfs, relative to the bundle or absolute; it must be a directory. */
static int cfg_root(json_t *r, struct oci_config *c, char *err, size_t len)
{
	const char *path = json_string_value(json_object_get(r, "path"));
	struct stat st;
	char *own = NULL;
	int rc;

	if (!json_is_object(r) || !path)
		return cfg_refuse(err, len, "root.path", "required: the container's root directory");
	if ((rc = cfg_string(json_object_get(r, "path"), "root.path", &own, err, len)))
		return rc;
	if (own[0] == '/')
		rc = snprintf(c->root, sizeof(c->root), "%s", own) >= (int)sizeof(c->root);
	else
		rc = snprintf(c->root, sizeof(c->root), "%s/%s", c->bundle, own) >= (int)sizeof(c->root);
	free(own);
	if (rc)
		return cfg_refuse(err, len, "root.path", "too long");
	if (stat(c->root, &st) || !S_ISDIR(st.st_mode))
		return cfg_refuse(err, len, "root.path", "%s is not a directory", c->root);
	return cfg_bool(json_object_get(r, "readonly"), "root.readonly", &c->readonly, err, len);
}

/* annotations: strings; io.ccvm.* are ccvm's own options, every one of them known. */
/* One io.ccvm.snapshot-KEY annotation: a field of the snapshot request table that
 * periodic snapshots take (`run --snapshot-KEY`), its value checked by the same table. */
static int cfg_ccvm_option(const char *key, const char *value, struct oci_config *c, char *err,
			   size_t len)
{
	const char *name = key + strlen(OCI_ANNOTATION_PREFIX);
	const struct snap_field *f = strncmp(name, "snapshot-", 9) == 0 ? snap_field_find(name) : NULL;
	struct snap_request scratch = { .file = NULL };
	char why[256];

	if (!f || !f->run || f->kind == SNAP_F_PATH || f->kind == SNAP_F_FLAG)
		return cfg_refuse(err, len, "annotations", "'%s' is no ccvm option (io.ccvm.snapshot-"
				  "policy, -compress, -rate, -precopy, -threads...: docs/oci.md)", key);
	if (snap_field_set(&scratch, f, "io.ccvm.snapshot-", value, why, sizeof(why)))
		return cfg_refuse(err, len, "annotations", "%s", why);
	if (c->n_ccvm_opts >= OCI_MAX_CCVM_OPTS)
		return cfg_refuse(err, len, "annotations", "too many io.ccvm.* options");
	c->ccvm_opts[c->n_ccvm_opts].name = name;
	c->ccvm_opts[c->n_ccvm_opts++].value = value;
	return 0;
}

/* annotations: strings; io.ccvm.* are ccvm's own options, every one of them known. */
static int cfg_annotations(json_t *a, struct oci_config *c, char *err, size_t len)
{
	const char *key;
	json_t *v;
	int rc;

	if (!a || json_is_null(a))
		return 0;
	if (!json_is_object(a))
		return cfg_refuse(err, len, "annotations", "expected an object of strings");
	c->annotations = a;
	json_object_foreach(a, key, v) {
		if (!json_is_string(v))
			return cfg_refuse(err, len, "annotations", "'%s' is not a string", key);
		if (strncmp(key, OCI_ANNOTATION_PREFIX, strlen(OCI_ANNOTATION_PREFIX)) == 0 &&
		    (rc = cfg_ccvm_option(key, json_string_value(v), c, err, len)))
			return rc;
	}
	return 0;
}

/* The top level, in the order a refusal is most useful. */
static int cfg_top(json_t *doc, struct oci_config *c, char *err, size_t len)
{
	static const char *const other_os[] = { "solaris", "windows", "vm", "zos" };
	const char *ver = json_string_value(json_object_get(doc, "ociVersion"));
	int rc;

	if (!json_is_object(doc))
		return cfg_refuse(err, len, "(top)", "expected a JSON object");
	if (!ver || strncmp(ver, "1.", 2) != 0)
		return cfg_refuse(err, len, "ociVersion", "'%s' is not a 1.x runtime spec version",
				  ver ? ver : "(missing)");
	for (size_t i = 0; i < sizeof(other_os) / sizeof(other_os[0]); i++)
		if ((rc = cfg_absent(doc, other_os[i], other_os[i], "ccvm-oci runs Linux containers",
				     err, len)))
			return rc;
	if ((rc = cfg_absent(doc, "hooks", "hooks", "ccvm-oci runs no OCI hooks", err, len)) ||
	    (rc = cfg_root(json_object_get(doc, "root"), c, err, len)) ||
	    (rc = cfg_process(json_object_get(doc, "process"), c, err, len)) ||
	    (rc = cfg_annotations(json_object_get(doc, "annotations"), c, err, len)))
		return rc;
	if (json_object_get(doc, "hostname") &&
	    (rc = cfg_string(json_object_get(doc, "hostname"), "hostname", &c->hostname, err, len)))
		return rc;
	if (json_object_get(doc, "domainname") &&
	    (rc = cfg_string(json_object_get(doc, "domainname"), "domainname", &c->domainname, err, len)))
		return rc;
	if ((rc = cfg_mounts(json_object_get(doc, "mounts"), c, err, len)) ||
	    (rc = cfg_linux(json_object_get(doc, "linux"), c, err, len)))
		return rc;
	if ((c->hostname || c->domainname) && !c->ns_uts)
		return cfg_refuse(err, len, c->hostname ? "hostname" : "domainname", "the container "
				  "has no UTS namespace of its own to set it in");
	return 0;
}

int oci_config_parse(const char *text, size_t n, const char *bundle, struct oci_config *c,
		     char *err, size_t len)
{
	json_error_t jerr;
	int rc;

	memset(c, 0, sizeof(*c));
	if (snprintf(c->bundle, sizeof(c->bundle), "%s", bundle) >= (int)sizeof(c->bundle))
		return log_set_err(-ENAMETOOLONG, err, len, "bundle path too long");
	c->doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
	if (!c->doc)
		return log_set_err(-EINVAL, err, len, "config.json: line %d: %s", jerr.line, jerr.text);
	rc = cfg_top(c->doc, c, err, len);
	if (rc)
		oci_config_free(c);
	return rc;
}

/* @path (a regular file, at most OCI_MAX_CONFIG_BYTES) read whole into *@text
 * (malloc'd, NUL-ended), its size in *@n: 0 or -errno with @err. */
static int cfg_read_file(const char *path, char **text, size_t *n, char *err, size_t len)
{
	struct stat st;
	ssize_t got = -1;
	int fd, rc = 0;

	*text = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		rc = log_set_err(fd < 0 ? -errno : -EINVAL, err, len, "%s: %s", path,
				 fd < 0 ? strerror(errno) : "not a regular file");
		goto out;
	}
	if (st.st_size > OCI_MAX_CONFIG_BYTES) {
		rc = log_set_err(-EFBIG, err, len, "%s: larger than %u bytes", path, OCI_MAX_CONFIG_BYTES);
		goto out;
	}
	*text = malloc((size_t)st.st_size + 1);
	if (*text)
		got = pread(fd, *text, (size_t)st.st_size, 0);
	if (got != st.st_size) {
		rc = log_set_err(*text ? -EIO : -ENOMEM, err, len, "%s: cannot read it whole", path);
		free(*text);
		*text = NULL;
		goto out;
	}
	(*text)[got] = '\0';
	*n = (size_t)got;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int oci_config_load(const char *bundle, struct oci_config *c, char *err, size_t len)
{
	char path[PATH_MAX], real[PATH_MAX], *text = NULL;
	size_t n = 0;
	int rc;

	memset(c, 0, sizeof(*c));
	if (!realpath(bundle, real))
		return log_set_err(-errno, err, len, "bundle %s: %s", bundle, strerror(errno));
	if (snprintf(path, sizeof(path), "%s/config.json", real) >= (int)sizeof(path))
		return log_set_err(-ENAMETOOLONG, err, len, "bundle %s: path too long", real);
	rc = cfg_read_file(path, &text, &n, err, len);
	if (!rc)
		rc = oci_config_parse(text, n, real, c, err, len);
	free(text);
	return rc;
}

int oci_process_parse(const char *text, size_t n, struct oci_config *c, char *err, size_t len)
{
	json_error_t jerr;
	int rc;

	memset(c, 0, sizeof(*c));
	c->doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
	if (!c->doc)
		return log_set_err(-EINVAL, err, len, "process: line %d: %s", jerr.line, jerr.text);
	rc = cfg_process(c->doc, c, err, len);
	if (rc) {
		static const char cfg_prefix[] = "config.json: ";
		size_t n = sizeof(cfg_prefix) - 1;

		/* the fields are named as in config.json, but this is not that file */
		if (strncmp(err, cfg_prefix, n) == 0)
			memmove(err, err + n, strlen(err + n) + 1);
		oci_config_free(c);
	}
	return rc;
}

int oci_process_load(const char *path, struct oci_config *c, char *err, size_t len)
{
	char *text = NULL;
	size_t n = 0;
	int rc;

	memset(c, 0, sizeof(*c));
	rc = cfg_read_file(path, &text, &n, err, len);
	if (!rc)
		rc = oci_process_parse(text, n, c, err, len);
	free(text);
	return rc;
}

void oci_config_free(struct oci_config *c)
{
	cfg_strings_free(c->args);
	cfg_strings_free(c->env);
	free(c->cwd);
	free(c->gids);
	free(c->hostname);
	free(c->domainname);
	cfg_mounts_free(c);
	free(c->netns_path);
	free(c->cgroups_path);
	free(c->cpus);
	free(c->mems);
	for (size_t i = 0; i < c->n_sysctls; i++) {
		free(c->sysctls[i].key);
		free(c->sysctls[i].value);
	}
	free(c->sysctls);
	cfg_strings_free(c->masked);
	cfg_strings_free(c->ro_paths);
	if (c->doc)
		json_decref(c->doc);
	memset(c, 0, sizeof(*c));
}
