/*
 * config_mount.c - config.json's mounts, checked.
 *
 * A bind (or rbind) and a tmpfs are made for real in the container's own mount
 * namespace, over the root the guest sees (oci/mount.c). proc, sysfs, cgroup, devpts
 * and mqueue are the personality's to serve: the guest's processes are not host
 * processes, so a host procfs there would describe the wrong ones; they are kept as
 * "virtual" and documented. Any other type, or an option not in the table below, is
 * refused by name.
 */
#include "config_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#define OCI_MOUNT_DATA_MAX 256

static const char *const virtual_types[] = { "proc", "sysfs", "cgroup", "cgroup2", "devpts",
					     "mqueue" };

/* Options that are flags (set or clear), and those that only say how propagation goes,
 * which a private namespace makes moot. */
static const struct {
	const char *name;
	unsigned long set, clear;
} mount_flags[] = {
	{ "nosuid", MS_NOSUID, 0 },    { "suid", 0, MS_NOSUID },
	{ "nodev", MS_NODEV, 0 },      { "dev", 0, MS_NODEV },
	{ "noexec", MS_NOEXEC, 0 },    { "exec", 0, MS_NOEXEC },
	{ "noatime", MS_NOATIME, 0 },  { "atime", 0, MS_NOATIME },
	{ "nodiratime", MS_NODIRATIME, 0 }, { "relatime", MS_RELATIME, 0 },
	{ "norelatime", 0, MS_RELATIME }, { "strictatime", MS_STRICTATIME, 0 },
	{ "sync", MS_SYNCHRONOUS, 0 }, { "async", 0, MS_SYNCHRONOUS },
};
static const char *const moot_options[] = { "private", "rprivate", "slave", "rslave", "shared",
					    "rshared", "unbindable", "runbindable", "z", "Z",
					    "nocopy", "copy", "defaults", "newinstance" };

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

/* key=value options: a tmpfs's data (size, mode, nr_inodes, uid, gid), a virtual
 * mount's (ignored with it); a bind takes none. */
static int mount_data(struct oci_mount *m, const char *opt, const char *field, char *err,
		      size_t len)
{
	static const char *const tmpfs_keys[] = { "size", "mode", "nr_inodes", "uid", "gid" };
	char key[32];
	size_t k = (size_t)(strchr(opt, '=') - opt), have;

	if (m->kind == OCI_MOUNT_VIRTUAL)
		return 0;
	snprintf(key, sizeof(key), "%.*s", (int)(k < sizeof(key) ? k : sizeof(key) - 1), opt);
	if (m->kind != OCI_MOUNT_TMPFS || !in_list(key, tmpfs_keys, 5))
		return cfg_refuse(err, len, field, "option '%s' is not supported here", opt);
	have = m->data ? strlen(m->data) : 0;
	if (have + strlen(opt) + 2 > OCI_MOUNT_DATA_MAX)
		return cfg_refuse(err, len, field, "options too long");
	char *d = realloc(m->data, have + strlen(opt) + 2);

	if (!d)
		return -ENOMEM;
	snprintf(d + have, strlen(opt) + 2, "%s%s", have ? "," : "", opt);
	m->data = d;
	return 0;
}

static int mount_option(struct oci_mount *m, const char *opt, const char *field, char *err,
			size_t len)
{
	if (strcmp(opt, "ro") == 0 || strcmp(opt, "rw") == 0) {
		m->ro = opt[1] == 'o';
		return 0;
	}
	if (strcmp(opt, "bind") == 0 || strcmp(opt, "rbind") == 0) {
		m->rec = opt[0] == 'r';
		return 0;
	}
	for (size_t i = 0; i < sizeof(mount_flags) / sizeof(mount_flags[0]); i++) {
		if (strcmp(opt, mount_flags[i].name) == 0) {
			m->flags = (m->flags | mount_flags[i].set) & ~mount_flags[i].clear;
			return 0;
		}
	}
	if (in_list(opt, moot_options, sizeof(moot_options) / sizeof(moot_options[0])))
		return 0;
	if (strchr(opt, '='))
		return mount_data(m, opt, field, err, len);
	if (m->kind == OCI_MOUNT_VIRTUAL)
		return 0; /* the personality's own: its options are its own too */
	return cfg_refuse(err, len, field, "option '%s' is not supported", opt);
}

/* What kind a mount is, from its type and whether its options say bind. */
static int mount_kind(json_t *j, struct oci_mount *m, const char *field, char *err, size_t len)
{
	const char *type = json_string_value(json_object_get(j, "type"));
	json_t *opts = json_object_get(j, "options"), *o;
	bool bind = type && strcmp(type, "bind") == 0;
	size_t i;

	json_array_foreach(opts, i, o)
		if (json_is_string(o) && (strcmp(json_string_value(o), "bind") == 0 ||
					  strcmp(json_string_value(o), "rbind") == 0))
			bind = true;
	if (bind) {
		m->kind = OCI_MOUNT_BIND;
		return 0;
	}
	if (type && strcmp(type, "tmpfs") == 0) {
		m->kind = OCI_MOUNT_TMPFS;
		return 0;
	}
	if (type && in_list(type, virtual_types, sizeof(virtual_types) / sizeof(virtual_types[0]))) {
		m->kind = OCI_MOUNT_VIRTUAL;
		return 0;
	}
	return cfg_refuse(err, len, field, "type '%s' is not supported (bind, tmpfs; proc, sysfs, "
			  "cgroup, devpts and mqueue are the personality's own)", type ? type : "(none)");
}

static int mount_one(json_t *j, struct oci_mount *m, const char *bundle, const char *field,
		     char *err, size_t len)
{
	json_t *opts = json_object_get(j, "options"), *o;
	size_t i;
	int rc;

	if (!json_is_object(j))
		return cfg_refuse(err, len, field, "expected an object");
	if ((rc = cfg_abs_path(json_object_get(j, "destination"), field, &m->dest, err, len)) ||
	    (rc = mount_kind(j, m, field, err, len)))
		return rc;
	if (opts && !json_is_array(opts))
		return cfg_refuse(err, len, field, "options: expected an array of strings");
	json_array_foreach(opts, i, o) {
		if (!json_is_string(o))
			return cfg_refuse(err, len, field, "options: expected strings");
		if ((rc = mount_option(m, json_string_value(o), field, err, len)))
			return rc;
	}
	if (m->kind != OCI_MOUNT_BIND)
		return 0;
	if ((rc = cfg_string(json_object_get(j, "source"), field, &m->src, err, len)))
		return rc;
	if (m->src[0] != '/') { /* relative to the bundle, as runc takes it */
		char *abs = NULL;

		if (asprintf(&abs, "%s/%s", bundle, m->src) < 0)
			return -ENOMEM;
		free(m->src);
		m->src = abs;
	}
	return 0;
}

int cfg_mounts(json_t *mounts, struct oci_config *c, char *err, size_t len)
{
	char field[PATH_MAX + 32];
	size_t n = json_array_size(mounts);

	if (mounts && !json_is_null(mounts) && !json_is_array(mounts))
		return cfg_refuse(err, len, "mounts", "expected an array");
	if (n > OCI_MAX_LIST)
		return cfg_refuse(err, len, "mounts", "more than %d", OCI_MAX_LIST);
	c->mounts = calloc(n + 1, sizeof(*c->mounts));
	if (!c->mounts)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *j = json_array_get(mounts, i);
		const char *dest = json_string_value(json_object_get(j, "destination"));
		int rc;

		snprintf(field, sizeof(field), "mounts[%zu] (%s)", i, dest ? dest : "?");
		c->n_mounts = i + 1;
		if ((rc = mount_one(j, &c->mounts[i], c->bundle, field, err, len)))
			return rc;
	}
	return 0;
}

void cfg_mounts_free(struct oci_config *c)
{
	for (size_t i = 0; i < c->n_mounts; i++) {
		free(c->mounts[i].dest);
		free(c->mounts[i].src);
		free(c->mounts[i].data);
	}
	free(c->mounts);
	c->mounts = NULL;
	c->n_mounts = 0;
}
