/*
 * cgroup.c - the container's cgroup, joined by the monitor.
 *
 * podman (cgroupfs manager) and containerd name a cgroup in linux.cgroupsPath and
 * expect the runtime to make it, set its limits and put the container in it. Here
 * the container is the whole VM: the monitor joins before it builds anything, so its
 * vCPU threads, its copies in a snapshot and the guest's RAM are all charged there.
 * The hierarchies are read from /proc/self/mountinfo: v1 (one per controller, plus
 * name=systemd), v2, or both (the hybrid layout of our machines). systemd's
 * slice:prefix:name paths would need systemd's D-Bus API and are refused.
 */
#include "cgroup.h"

#include "../base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CG_MAX_HIER 32
#define CG_DEFAULT_SHARES 1024 /* cgroup v1's default cpu.shares: v2's default weight */

struct cg_hier {
	char mnt[PATH_MAX];
	bool v2;
	char opts[256];          /* v1: its controllers, among other options */
};

bool oci_cgroup_is_systemd(const char *path)
{
	return path[0] != '/' && strchr(path, ':') != NULL;
}

/* Every cgroup hierarchy mounted, from mountinfo; how many. */
static int cg_hierarchies(struct cg_hier *h, int max)
{
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int n = 0;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], fstype[32], super[256];
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(dash + 3, "%31s %*s %255s", fstype, super) != 2)
			continue;
		if (strcmp(fstype, "cgroup") != 0 && strcmp(fstype, "cgroup2") != 0)
			continue;
		snprintf(h[n].mnt, sizeof(h[n].mnt), "%s", mnt);
		h[n].v2 = strcmp(fstype, "cgroup2") == 0;
		if (snprintf(h[n].opts, sizeof(h[n].opts), ",%s,", super) >= (int)sizeof(h[n].opts))
			continue;
		n++;
	}
	fclose(f);
	return n;
}

static bool cg_has(const struct cg_hier *h, const char *controller)
{
	char want[40];

	snprintf(want, sizeof(want), ",%s,", controller);
	return strstr(h->opts, want) != NULL;
}

/* @value into @dir/@file; -errno. */
static int cg_write(const char *dir, const char *file, const char *value)
{
	char path[PATH_MAX + 64];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, value, strlen(value)) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* mkdir -p of @path, whose components were checked not to hold "..". */
static int cg_mkdirs(char *path, size_t skip)
{
	for (char *p = path + skip + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int rc = mkdir(path, 0755) && errno != EEXIST ? -errno : 0;

		*p = '/';
		if (rc)
			return rc;
	}
	return mkdir(path, 0755) && errno != EEXIST ? -errno : 0;
}

/* @dir's @file (cpuset.cpus or .mems) into @val, without its newline: its length, or
 * 0 when it is empty or unreadable. */
static size_t cg_read(const char *dir, const char *file, char *val, size_t n)
{
	char path[PATH_MAX + PATH_MAX + 64];
	ssize_t got;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	got = fd < 0 ? -1 : read(fd, val, n - 1);
	if (fd >= 0)
		close(fd);
	if (got <= 0)
		return 0;
	val[got] = '\0';
	val[strcspn(val, "\n")] = '\0';
	return strlen(val);
}

/* cpuset's cpus and mems of a new v1 cgroup are empty, and no process can join it so:
 * each level from the hierarchy's root down to @dir that is empty takes its parent's,
 * and @dir then the config's where given. */
static int cg_cpuset_v1(const char *mnt, const char *dir, const struct oci_config *c)
{
	static const char *const files[] = { "cpuset.cpus", "cpuset.mems" };
	const char *given[] = { c->cpus, c->mems };
	char level[PATH_MAX + PATH_MAX], val[4096];
	int rc;

	snprintf(level, sizeof(level), "%s", dir);
	for (char *p = level + strlen(mnt); p; p = strchr(p + 1, '/')) {
		char *next = strchr(p + 1, '/'), parent[PATH_MAX + PATH_MAX];

		if (next)
			*next = '\0';
		snprintf(parent, sizeof(parent), "%.*s", (int)(strrchr(level, '/') - level), level);
		for (int i = 0; i < 2 && strlen(level) > strlen(mnt); i++) {
			if (cg_read(level, files[i], val, sizeof(val)) || !cg_read(parent, files[i], val, sizeof(val)))
				continue;
			if ((rc = cg_write(level, files[i], val)))
				return rc;
		}
		if (next)
			*next = '/';
	}
	for (int i = 0; i < 2; i++)
		if (given[i] && (rc = cg_write(dir, files[i], given[i])))
			return rc;
	return 0;
}

#define CG_SET(dir, name, file, ...)                                           \
	do {                                                                   \
		char v_[64];                                                   \
		int rc_;                                                       \
		snprintf(v_, sizeof(v_), __VA_ARGS__);                         \
		*(file) = (name);                                              \
		if ((rc_ = cg_write(dir, name, v_)))                           \
			return rc_;                                            \
	} while (0)

/* v1: each controller's own files, where this hierarchy has the controller. */
static int cg_limits_v1(const struct cg_hier *h, const char *dir, const struct oci_config *c,
			const char **file)
{
	if (c->mem_limit && cg_has(h, "memory"))
		CG_SET(dir, "memory.limit_in_bytes", file, "%lld", (long long)c->mem_limit);
	if (c->pids_limit && cg_has(h, "pids"))
		CG_SET(dir, "pids.max", file, "%lld", (long long)c->pids_limit);
	if (cg_has(h, "cpu")) {
		if (c->cpu_shares)
			CG_SET(dir, "cpu.shares", file, "%llu", (unsigned long long)c->cpu_shares);
		if (c->cpu_period)
			CG_SET(dir, "cpu.cfs_period_us", file, "%llu", (unsigned long long)c->cpu_period);
		if (c->cpu_quota)
			CG_SET(dir, "cpu.cfs_quota_us", file, "%lld", (long long)c->cpu_quota);
	}
	if (cg_has(h, "cpuset")) {
		*file = "cpuset.cpus";
		return cg_cpuset_v1(h->mnt, dir, c);
	}
	return 0;
}

/* v2: @dir's controllers enabled in its parent, one by one (a host may lack one, and a
 * write naming it would enable none), best effort: a parent may have them already. */
static void cg_enable_v2(const char *dir)
{
	static const char *const ctrl[] = { "+memory", "+pids", "+cpu", "+cpuset" };

	for (size_t i = 0; i < sizeof(ctrl) / sizeof(ctrl[0]); i++)
		cg_write(dir, "cgroup.subtree_control", ctrl[i]);
}

/* v2: the controllers enabled down to the cgroup, then its files; cpu.shares as
 * cpu.weight, the conversion runc and crun use (1024, the default, is weight 100 and
 * needs no cpu controller). */
static int cg_limits_v2(const char *mnt, const char *dir, const struct oci_config *c,
			const char **file)
{
	char anc[PATH_MAX + PATH_MAX];

	snprintf(anc, sizeof(anc), "%s", dir);
	cg_enable_v2(mnt);
	for (char *p = anc + strlen(mnt); (p = strchr(p + 1, '/'));) {
		*p = '\0';
		cg_enable_v2(anc);
		*p = '/';
	}
	if (c->mem_limit)
		CG_SET(dir, "memory.max", file, "%lld", (long long)c->mem_limit);
	if (c->pids_limit)
		CG_SET(dir, "pids.max", file, "%lld", (long long)c->pids_limit);
	if (c->cpu_shares && c->cpu_shares != CG_DEFAULT_SHARES)
		CG_SET(dir, "cpu.weight", file, "%llu",
		       1 + (unsigned long long)(c->cpu_shares < 2 ? 0 : c->cpu_shares - 2) * 9999 / 262142);
	if (c->cpu_quota)
		CG_SET(dir, "cpu.max", file, "%lld %llu", (long long)c->cpu_quota,
		       (unsigned long long)(c->cpu_period ? c->cpu_period : 100000));
	if (c->cpus)
		CG_SET(dir, "cpuset.cpus", file, "%s", c->cpus);
	if (c->mems)
		CG_SET(dir, "cpuset.mems", file, "%s", c->mems);
	return 0;
}

/* Join one hierarchy's @rel (from cgroupsPath). A v2 hierarchy beside v1 ones (the
 * hybrid layout) has no controllers: it is only joined. */
static int cg_join_one(const struct cg_hier *h, const char *rel, const struct oci_config *c,
		       bool hybrid, char *err, size_t len)
{
	char dir[PATH_MAX + PATH_MAX], pid[24];
	const char *file = "cgroup.procs";
	int rc;

	if (snprintf(dir, sizeof(dir), "%s%s%s", h->mnt, rel[0] == '/' ? "" : "/", rel) >=
	    (int)sizeof(dir))
		return log_set_err(-ENAMETOOLONG, err, len, "linux.cgroupsPath: too long");
	rc = cg_mkdirs(dir, strlen(h->mnt));
	if (!rc && !h->v2)
		rc = cg_limits_v1(h, dir, c, &file);
	else if (!rc && !hybrid)
		rc = cg_limits_v2(h->mnt, dir, c, &file);
	if (!rc) {
		file = "cgroup.procs";
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		rc = cg_write(dir, file, pid);
	}
	if (rc)
		return log_set_err(rc, err, len, "linux.cgroupsPath %s: %s/%s: %s", rel, dir, file,
				   strerror(-rc));
	return 0;
}

int oci_cgroup_join(const struct oci_config *c, bool systemd, char *err, size_t len)
{
	struct cg_hier h[CG_MAX_HIER];
	const char *rel = c->cgroups_path;
	bool hybrid = false;
	int n, rc;

	if (!rel || !rel[0])
		return 0;
	if (oci_cgroup_is_systemd(rel) || systemd)
		return log_set_err(-ENOTSUP, err, len, "linux.cgroupsPath %s: systemd cgroups need "
				   "systemd, which ccvm-oci does not drive; run podman with "
				   "--cgroup-manager cgroupfs (or containerd without SystemdCgroup)", rel);
	if (strstr(rel, ".."))
		return log_set_err(-EINVAL, err, len, "linux.cgroupsPath %s: holds '..'", rel);
	n = cg_hierarchies(h, CG_MAX_HIER);
	if (n == 0)
		return log_set_err(-ENOENT, err, len, "linux.cgroupsPath %s: no cgroup hierarchy is "
				   "mounted", rel);
	for (int i = 0; i < n; i++)
		hybrid |= !h[i].v2;
	for (int i = 0; i < n; i++)
		if ((rc = cg_join_one(&h[i], rel, c, hybrid, err, len)))
			return rc;
	return 0;
}

void oci_cgroup_remove(const char *path)
{
	struct cg_hier h[CG_MAX_HIER];
	int n;

	if (!path || !path[0] || oci_cgroup_is_systemd(path) || strstr(path, ".."))
		return;
	n = cg_hierarchies(h, CG_MAX_HIER);
	for (int i = 0; i < n; i++) {
		char dir[PATH_MAX + PATH_MAX];

		if (snprintf(dir, sizeof(dir), "%s%s%s", h[i].mnt, path[0] == '/' ? "" : "/", path) >=
		    (int)sizeof(dir))
			return;
		if (rmdir(dir) && errno != ENOENT)
			log_debug("cannot remove cgroup %s: %s", dir, strerror(errno));
	}
}
