/*
 * state.c - a container's record under ccvm-oci's root.
 *
 * state.json is ccvm-oci's own file, but it is read back by later commands, so it is
 * checked as any input is: bounded, every field typed. A container's status comes
 * from its monitor process, never from the file: the start FIFO still there means
 * created, a live process with the recorded start time means running (or paused,
 * which the record keeps), anything else stopped.
 */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAX_BYTES (1u << 20)

bool oci_id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > OCI_MAX_ID || id[0] == '.')
		return false;
	return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == n;
}

int oci_state_path(const char *root, const char *id, char out[PATH_MAX])
{
	if (!oci_id_ok(id))
		return -EINVAL;
	if (snprintf(out, PATH_MAX, "%s/%s", root, id) >= PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

unsigned long long oci_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold anything; the fields follow its ')' */
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
		return 0; /* a zombie has ended: the container is stopped */
	/* p[1] is the space before field 3 (the state); starttime is field 22 */
	for (int field = 3; p && field <= 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	return start;
}

int oci_state_save(const struct oci_state *st)
{
	char tmp[PATH_MAX + 16], path[PATH_MAX + 16];
	json_t *j = json_pack("{s:s, s:i, s:I, s:s, s:s, s:s, s:b, s:s?, s:O?}", "id", st->id,
			      "pid", (int)st->pid, "start", (json_int_t)st->start, "bundle",
			      st->bundle, "rootfs", st->rootfs, "created", st->created, "paused",
			      st->paused, "cgroupsPath", st->cgroups_path, "annotations",
			      st->annotations);
	int fd, rc = 0;

	if (!j)
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", st->dir, OCI_STATE_FILE);
	snprintf(path, sizeof(path), "%s/%s", st->dir, OCI_STATE_FILE);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if (json_dumpfd(j, fd, JSON_COMPACT) || fsync(fd))
		rc = -EIO;
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
out:
	json_decref(j);
	return rc;
}

static int state_str(json_t *j, const char *key, char *out, size_t n, bool required)
{
	json_t *v = json_object_get(j, key);

	if (!v && !required) {
		out[0] = '\0';
		return 0;
	}
	if (!json_is_string(v) || json_string_length(v) >= n)
		return -EINVAL;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* The fields of a record read back, each checked. */
static int state_fields(json_t *j, struct oci_state *st)
{
	json_t *pid = json_object_get(j, "pid"), *start = json_object_get(j, "start");
	json_t *cg = json_object_get(j, "cgroupsPath"), *ann = json_object_get(j, "annotations");

	if (!json_is_object(j) || !json_is_integer(pid) || !json_is_integer(start) ||
	    json_integer_value(pid) < 0 || json_integer_value(pid) > INT32_MAX ||
	    json_integer_value(start) < 0)
		return -EINVAL;
	if (state_str(j, "bundle", st->bundle, sizeof(st->bundle), true) ||
	    state_str(j, "rootfs", st->rootfs, sizeof(st->rootfs), true) ||
	    state_str(j, "created", st->created, sizeof(st->created), true))
		return -EINVAL;
	st->pid = (pid_t)json_integer_value(pid);
	st->start = (unsigned long long)json_integer_value(start);
	st->paused = json_is_true(json_object_get(j, "paused"));
	if (json_is_string(cg) && !(st->cgroups_path = strdup(json_string_value(cg))))
		return -ENOMEM;
	if (json_is_object(ann))
		st->annotations = json_incref(ann);
	return 0;
}

int oci_state_load(const char *root, const char *id, struct oci_state *st, char *err, size_t len)
{
	char path[PATH_MAX + 16];
	json_error_t jerr;
	json_t *j;
	int rc;

	memset(st, 0, sizeof(*st));
	if ((rc = oci_state_path(root, id, st->dir)))
		return rc == -EINVAL ? -ENOENT : rc;
	snprintf(st->id, sizeof(st->id), "%s", id);
	snprintf(path, sizeof(path), "%s/%s", st->dir, OCI_STATE_FILE);
	j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		struct stat sb;

		if (stat(st->dir, &sb) && errno == ENOENT)
			return -ENOENT;
		snprintf(err, len, "%s: %s", path, jerr.text);
		return -EIO;
	}
	rc = state_fields(j, st);
	json_decref(j);
	if (rc) {
		snprintf(err, len, "%s: a field is missing or not what ccvm-oci writes", path);
		oci_state_free(st);
	}
	return rc;
}

void oci_state_free(struct oci_state *st)
{
	free(st->cgroups_path);
	st->cgroups_path = NULL;
	if (st->annotations)
		json_decref(st->annotations);
	st->annotations = NULL;
}

enum oci_status oci_state_status(const struct oci_state *st)
{
	char fifo[PATH_MAX + 16];

	if (st->pid <= 0)
		return OCI_CREATING;
	if (!st->start || oci_proc_start(st->pid) != st->start)
		return OCI_STOPPED;
	snprintf(fifo, sizeof(fifo), "%s/%s", st->dir, OCI_FIFO_FILE);
	if (access(fifo, F_OK) == 0)
		return OCI_CREATED;
	return st->paused ? OCI_PAUSED : OCI_RUNNING;
}

const char *oci_status_name(enum oci_status s)
{
	static const char *const names[] = { "creating", "created", "running", "paused", "stopped" };

	return names[s];
}

json_t *oci_state_json(const struct oci_state *st)
{
	enum oci_status s = oci_state_status(st);
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "ociVersion", OCI_SPEC_VERSION,
			      "id", st->id, "status", oci_status_name(s), "bundle", st->bundle,
			      "rootfs", st->rootfs, "created", st->created);

	if (!j)
		return NULL;
	/* The spec: pid while the process exists, that is created or running (paused) */
	if (s != OCI_STOPPED && st->pid > 0)
		json_object_set_new(j, "pid", json_integer(st->pid));
	else
		json_object_set_new(j, "pid", json_integer(0));
	json_object_set_new(j, "annotations", st->annotations ? json_copy(st->annotations)
							      : json_object());
	json_object_set_new(j, "owner", json_string(""));
	return j;
}
