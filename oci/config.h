/*
 * config.h - an OCI bundle's config.json, read whole and checked (config.c).
 *
 * What ccvm-oci builds a container from: every field it honours, already checked, in
 * monitor memory. A field it cannot honour is refused here, before anything is built,
 * with a message naming the field; docs/oci.md has the table.
 */
#ifndef CCVM_OCI_CONFIG_H
#define CCVM_OCI_CONFIG_H

#include "../vmm/linux/lx.h"

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OCI_MAX_CONFIG_BYTES (4u << 20) /* far above any real one (podman's: ~10 KiB) */
#define OCI_MAX_LIST         4096       /* args, env, mounts, paths: entries at most */
#define OCI_MAX_STR          PATH_MAX   /* any one string */
#define OCI_MAX_CCVM_OPTS    32         /* io.ccvm.* annotations */

enum oci_mount_kind {
	OCI_MOUNT_BIND,    /* bind or rbind: made in the container's mount namespace */
	OCI_MOUNT_TMPFS,   /* a tmpfs there */
	OCI_MOUNT_VIRTUAL, /* proc, sysfs, cgroup, devpts, mqueue: the personality's own */
};

struct oci_mount {
	enum oci_mount_kind kind;
	char *dest;              /* absolute, in the container */
	char *src;               /* bind: absolute host path */
	bool rec;                /* rbind */
	bool ro;
	unsigned long flags;     /* MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_NOATIME... */
	char *data;              /* tmpfs: size=, mode=... */
};

struct oci_sysctl {
	char *key;               /* net.ipv4.ping_group_range */
	char *value;
};

struct oci_config {
	json_t *doc;             /* the whole file, kept for the image and for seccomp */
	char bundle[PATH_MAX];   /* absolute */
	char root[PATH_MAX];     /* root.path, absolute */
	bool readonly;
	char **args;             /* NULL-terminated */
	size_t n_args;
	char **env;              /* NULL-terminated */
	size_t n_env;
	char *cwd;
	uint32_t uid, gid;
	bool umask_set;
	mode_t umask;
	gid_t *gids;             /* additionalGids */
	size_t n_gids;
	bool terminal;
	struct lx_rlimits rlimits;
	bool oom_set;
	int oom_score_adj;
	char *hostname, *domainname;
	struct oci_mount *mounts;
	size_t n_mounts;
	bool ns_net, ns_uts, ns_ipc, ns_cgroup;
	char *netns_path;        /* network namespace to join; NULL with ns_net: a new one */
	char *cgroups_path;
	int64_t mem_limit;       /* bytes; 0: none */
	int64_t pids_limit;      /* 0: none */
	uint64_t cpu_shares;     /* 0: not given */
	int64_t cpu_quota;       /* 0: not given */
	uint64_t cpu_period;
	char *cpus, *mems;       /* cpuset */
	struct oci_sysctl *sysctls;
	size_t n_sysctls;
	char **masked;
	size_t n_masked;
	char **ro_paths;
	size_t n_ro_paths;
	json_t *seccomp;         /* linux.seccomp, borrowed from doc; NULL: none */
	json_t *annotations;     /* borrowed from doc; NULL: none */
	struct {                 /* io.ccvm.snapshot-KEY: run's --snapshot-KEY, checked */
		const char *name, *value; /* "snapshot-rate", "20"; borrowed from doc */
	} ccvm_opts[OCI_MAX_CCVM_OPTS];
	size_t n_ccvm_opts;
};

/*
 * oci_config_load - read @bundle/config.json whole into @c and check every field.
 *
 * Returns 0, or -errno with a message in @err that names the field ("linux.devices[2]
 * (/dev/fuse): ..."); @c holds nothing then.
 */
int oci_config_load(const char *bundle, struct oci_config *c, char *err, size_t len);
/* The same from a JSON text already in memory, for tests and fuzzing; @bundle is where
 * relative paths start. */
int oci_config_parse(const char *text, size_t n, const char *bundle, struct oci_config *c,
		     char *err, size_t len);
/* An exec's process description (runc exec --process FILE: config.json's process
 * object alone) into @c's process fields, checked as config.json's are: 0, or -errno
 * with a message naming the field. And the same from text in memory. */
int oci_process_load(const char *path, struct oci_config *c, char *err, size_t len);
int oci_process_parse(const char *text, size_t n, struct oci_config *c, char *err, size_t len);
void oci_config_free(struct oci_config *c);

#endif
