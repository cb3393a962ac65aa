/*
 * config_linux.c - config.json's linux object, checked.
 *
 * Namespaces, devices, resources (what the container's cgroup is given), sysctls,
 * seccomp and the masked and read-only paths. A user namespace, a device beyond the
 * six every container has, and resources ccvm does not set are refused by name.
 */
#include "config_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The devices every container gets (null, zero, full, random, urandom, tty): a
 * config may list them, and nothing else. */
static const struct {
	const char *path;
	int major, minor;
} std_devices[] = {
	{ "/dev/null", 1, 3 },   { "/dev/zero", 1, 5 },    { "/dev/full", 1, 7 },
	{ "/dev/random", 1, 8 }, { "/dev/urandom", 1, 9 }, { "/dev/tty", 5, 0 },
};

static int cfg_devices(json_t *v, char *err, size_t len)
{
	char field[PATH_MAX + 32];
	json_t *d;
	size_t i;

	if (v && !json_is_null(v) && !json_is_array(v))
		return cfg_refuse(err, len, "linux.devices", "expected an array");
	json_array_foreach(v, i, d) {
		const char *path = json_string_value(json_object_get(d, "path"));
		json_int_t ma = json_integer_value(json_object_get(d, "major"));
		json_int_t mi = json_integer_value(json_object_get(d, "minor"));
		bool ok = false;

		snprintf(field, sizeof(field), "linux.devices[%zu] (%s)", i, path ? path : "?");
		for (size_t k = 0; path && k < sizeof(std_devices) / sizeof(std_devices[0]); k++)
			ok |= strcmp(path, std_devices[k].path) == 0 && ma == std_devices[k].major &&
			      mi == std_devices[k].minor;
		if (!ok)
			return cfg_refuse(err, len, field, "only null, zero, full, random, urandom "
					  "and tty reach a guest");
	}
	return 0;
}

/* One linux.namespaces entry: which ccvm builds, joins or leaves to the personality. */
static int cfg_namespace(json_t *ns, size_t i, struct oci_config *c, char *err, size_t len)
{
	const char *type = json_string_value(json_object_get(ns, "type"));
	json_t *path = json_object_get(ns, "path");
	char field[64];

	snprintf(field, sizeof(field), "linux.namespaces[%zu] (%s)", i, type ? type : "?");
	if (!type)
		return cfg_refuse(err, len, field, "a namespace needs a type");
	if (strcmp(type, "user") == 0 || strcmp(type, "time") == 0)
		return cfg_refuse(err, len, field, "%s namespaces are not supported",
				  type);
	if (strcmp(type, "pid") == 0)
		return 0; /* the guest's processes are the personality's, not host processes */
	if (path && strcmp(type, "network") != 0)
		return cfg_refuse(err, len, field, "only a network namespace may be joined by path");
	if (strcmp(type, "network") == 0) {
		c->ns_net = true;
		return path ? cfg_abs_path(path, field, &c->netns_path, err, len) : 0;
	}
	if (strcmp(type, "uts") == 0)
		c->ns_uts = true;
	else if (strcmp(type, "ipc") == 0)
		c->ns_ipc = true;
	else if (strcmp(type, "cgroup") == 0)
		c->ns_cgroup = true;
	else if (strcmp(type, "mount") != 0) /* the mount namespace is always made */
		return cfg_refuse(err, len, field, "unknown namespace type");
	return 0;
}

static int cfg_namespaces(json_t *v, struct oci_config *c, char *err, size_t len)
{
	json_t *ns;
	size_t i;
	int rc;

	if (v && !json_is_null(v) && !json_is_array(v))
		return cfg_refuse(err, len, "linux.namespaces", "expected an array");
	json_array_foreach(v, i, ns)
		if ((rc = cfg_namespace(ns, i, c, err, len)))
			return rc;
	return 0;
}

/* An optional integer at @key of @obj. */
static int cfg_opt_int(json_t *obj, const char *key, const char *field, int64_t lo, int64_t hi,
		       int64_t *out, char *err, size_t len)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v))
		return 0;
	return cfg_int(v, field, lo, hi, out, err, len);
}

static int cfg_cpu(json_t *cpu, struct oci_config *c, char *err, size_t len)
{
	int64_t shares = 0, period = 0;
	int rc;

	if (!cpu || json_is_null(cpu))
		return 0;
	if ((rc = cfg_absent(cpu, "realtimeRuntime", "linux.resources.cpu.realtimeRuntime",
			     "real-time scheduling is not set for a VM", err, len)) ||
	    (rc = cfg_absent(cpu, "realtimePeriod", "linux.resources.cpu.realtimePeriod",
			     "real-time scheduling is not set for a VM", err, len)) ||
	    (rc = cfg_absent(cpu, "idle", "linux.resources.cpu.idle", "not supported", err, len)) ||
	    (rc = cfg_absent(cpu, "burst", "linux.resources.cpu.burst", "not supported", err, len)) ||
	    (rc = cfg_opt_int(cpu, "shares", "linux.resources.cpu.shares", 0, 262144, &shares, err, len)) ||
	    (rc = cfg_opt_int(cpu, "quota", "linux.resources.cpu.quota", -1, INT64_MAX, &c->cpu_quota, err, len)) ||
	    (rc = cfg_opt_int(cpu, "period", "linux.resources.cpu.period", 0, 1000000, &period, err, len)))
		return rc;
	c->cpu_shares = (uint64_t)shares;
	c->cpu_period = (uint64_t)period;
	if (json_object_get(cpu, "cpus") && json_string_length(json_object_get(cpu, "cpus")) &&
	    (rc = cfg_string(json_object_get(cpu, "cpus"), "linux.resources.cpu.cpus", &c->cpus, err, len)))
		return rc;
	if (json_object_get(cpu, "mems") && json_string_length(json_object_get(cpu, "mems")) &&
	    (rc = cfg_string(json_object_get(cpu, "mems"), "linux.resources.cpu.mems", &c->mems, err, len)))
		return rc;
	for (const char *s = c->cpus; s && *s; s++)
		if (!strchr("0123456789,-", *s))
			return cfg_refuse(err, len, "linux.resources.cpu.cpus", "'%s' is not a CPU list", c->cpus);
	for (const char *s = c->mems; s && *s; s++)
		if (!strchr("0123456789,-", *s))
			return cfg_refuse(err, len, "linux.resources.cpu.mems", "'%s' is not a node list", c->mems);
	return 0;
}

static int cfg_resources(json_t *r, struct oci_config *c, char *err, size_t len)
{
	static const char *const refused[] = { "blockIO", "hugepageLimits", "network", "rdma",
					       "unified" };
	json_t *mem = json_object_get(r, "memory");
	char field[64];
	int rc;

	if (!r || json_is_null(r))
		return 0;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(field, sizeof(field), "linux.resources.%s", refused[i]);
		if ((rc = cfg_absent(r, refused[i], field, "not set by ccvm-oci", err, len)))
			return rc;
	}
	if ((rc = cfg_absent(mem, "kernel", "linux.resources.memory.kernel", "not supported", err, len)) ||
	    (rc = cfg_absent(mem, "kernelTCP", "linux.resources.memory.kernelTCP", "not supported", err, len)) ||
	    (rc = cfg_absent(mem, "disableOOMKiller", "linux.resources.memory.disableOOMKiller",
			     "not supported", err, len)) ||
	    (rc = cfg_opt_int(mem, "limit", "linux.resources.memory.limit", -1, INT64_MAX,
			      &c->mem_limit, err, len)) ||
	    (rc = cfg_opt_int(json_object_get(r, "pids"), "limit", "linux.resources.pids.limit", -1,
			      INT64_MAX, &c->pids_limit, err, len)))
		return rc;
	if (c->mem_limit < 0)
		c->mem_limit = 0;
	if (c->pids_limit < 0)
		c->pids_limit = 0;
	/* devices: cgroup rules. The personality gives a guest only the standard devices
	 * whatever they say, so they are accepted as they stand. */
	return cfg_cpu(json_object_get(r, "cpu"), c, err, len);
}

/* A sysctl is set only where a namespace of the container's own holds it. */
static int cfg_sysctls(json_t *v, struct oci_config *c, char *err, size_t len)
{
	const char *key;
	json_t *val;
	int rc;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v) || json_object_size(v) > OCI_MAX_LIST)
		return cfg_refuse(err, len, "linux.sysctl", "expected an object of strings");
	c->sysctls = calloc(json_object_size(v) + 1, sizeof(*c->sysctls));
	if (!c->sysctls)
		return -ENOMEM;
	json_object_foreach(v, key, val) {
		bool net = strncmp(key, "net.", 4) == 0;
		bool ipc = strncmp(key, "kernel.shm", 10) == 0 || strncmp(key, "kernel.msg", 10) == 0 ||
			   strcmp(key, "kernel.sem") == 0 || strncmp(key, "fs.mqueue.", 10) == 0;
		struct oci_sysctl *s = &c->sysctls[c->n_sysctls];

		if (strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != strlen(key) || strstr(key, ".."))
			return cfg_refuse(err, len, "linux.sysctl", "'%s' is not a sysctl name", key);
		if (!(net && c->ns_net) && !(ipc && c->ns_ipc))
			return cfg_refuse(err, len, "linux.sysctl", "'%s' is not in a namespace of "
					  "the container's own", key);
		if ((rc = cfg_string(val, "linux.sysctl", &s->value, err, len)))
			return rc;
		s->key = strdup(key);
		c->n_sysctls++;
		if (!s->key)
			return -ENOMEM;
		if (strchr(s->value, '\n'))
			return cfg_refuse(err, len, "linux.sysctl", "'%s' holds a newline", key);
	}
	return 0;
}

static int cfg_paths(json_t *v, const char *field, char ***out, size_t *n, char *err, size_t len)
{
	int rc = cfg_strings(v, field, out, n, err, len);

	for (size_t i = 0; !rc && i < *n; i++)
		if ((*out)[i][0] != '/' || strstr((*out)[i], ".."))
			rc = cfg_refuse(err, len, field, "'%s' is not an absolute path", (*out)[i]);
	return rc;
}

/* linux.* fields ccvm cannot honour. */
static const struct cfg_refusal linux_refused[] = {
	{ "uidMappings", "user-namespace mappings are not supported" },
	{ "gidMappings", "user-namespace mappings are not supported" },
	{ "intelRdt", "not supported" },
	{ "personality", "not supported" },
	{ "memoryPolicy", "not supported" },
	{ "timeOffsets", "time namespaces are not supported" },
	{ NULL, NULL },
};

int cfg_linux(json_t *l, struct oci_config *c, char *err, size_t len)
{
	json_t *sec = json_object_get(l, "seccomp");
	int rc;

	if (!l || json_is_null(l))
		return 0;
	if (!json_is_object(l))
		return cfg_refuse(err, len, "linux", "expected an object");
	if ((rc = cfg_refused(l, "linux", linux_refused, err, len)) ||
	    (rc = cfg_namespaces(json_object_get(l, "namespaces"), c, err, len)) ||
	    (rc = cfg_devices(json_object_get(l, "devices"), err, len)) ||
	    (rc = cfg_resources(json_object_get(l, "resources"), c, err, len)) ||
	    (rc = cfg_sysctls(json_object_get(l, "sysctl"), c, err, len)) ||
	    (rc = cfg_paths(json_object_get(l, "maskedPaths"), "linux.maskedPaths", &c->masked,
			    &c->n_masked, err, len)) ||
	    (rc = cfg_paths(json_object_get(l, "readonlyPaths"), "linux.readonlyPaths",
			    &c->ro_paths, &c->n_ro_paths, err, len)))
		return rc;
	if (json_object_get(l, "cgroupsPath") &&
	    (rc = cfg_string(json_object_get(l, "cgroupsPath"), "linux.cgroupsPath", &c->cgroups_path,
			     err, len)))
		return rc;
	if (sec && !json_is_null(sec)) {
		if (!json_is_object(sec))
			return cfg_refuse(err, len, "linux.seccomp", "expected an object");
		c->seccomp = sec;
	}
	return 0;
}
