/*
 * state.h - a container's record under ccvm-oci's root (state.c).
 *
 * Each container is a directory ROOT/ID holding state.json (what `state` reports and
 * what every command needs), the start FIFO while it is created and not started, and
 * the VM's control socket. Status is never stored: it is read from the process.
 */
#ifndef CCVM_OCI_STATE_H
#define CCVM_OCI_STATE_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define OCI_DEFAULT_ROOT "/run/ccvm-oci"
#define OCI_MAX_ID       128
#define OCI_STATE_FILE   "state.json"
#define OCI_FIFO_FILE    "exec.fifo"
#define OCI_CTL_FILE     "ctl.sock"
#define OCI_SECCOMP_FILE "seccomp.json" /* linux.seccomp, for ccvm run --seccomp-profile */
#define OCI_SPEC_VERSION "1.0.2"

enum oci_status { OCI_CREATING, OCI_CREATED, OCI_RUNNING, OCI_PAUSED, OCI_STOPPED };

struct oci_state {
	char id[OCI_MAX_ID + 1];
	char dir[PATH_MAX];        /* ROOT/ID */
	char bundle[PATH_MAX];
	char rootfs[PATH_MAX];
	pid_t pid;                 /* the monitor; 0 before create has it */
	unsigned long long start;  /* its start time (/proc/PID/stat), against pid reuse */
	char created[40];          /* RFC 3339, UTC */
	bool paused;
	char *cgroups_path;        /* the cgroup it made, for delete; NULL: none */
	json_t *annotations;       /* owned; NULL: none */
};

/* An ID runc would take: letters, digits, '_', '-', '.', not starting with '.'. */
bool oci_id_ok(const char *id);
/* @root/@id into @out; 0 or -ENAMETOOLONG/-EINVAL (a bad ID). */
int oci_state_path(const char *root, const char *id, char out[PATH_MAX]);
/* state.json written whole (temporary file, fsync, rename). 0 or -errno. */
int oci_state_save(const struct oci_state *st);
/* Read @root/@id's record. 0, -ENOENT (no such container), or -errno with @err. */
int oci_state_load(const char *root, const char *id, struct oci_state *st, char *err, size_t len);
void oci_state_free(struct oci_state *st);
enum oci_status oci_state_status(const struct oci_state *st);
const char *oci_status_name(enum oci_status s);
/* The OCI state object (runtime-spec's state-schema.json, with runc's created and
 * rootfs). A new reference. */
json_t *oci_state_json(const struct oci_state *st);
/* The start time of @pid (clock ticks since boot), or 0 when it is gone. */
unsigned long long oci_proc_start(pid_t pid);

#endif
