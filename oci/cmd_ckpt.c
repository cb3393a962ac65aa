/*
 * cmd_ckpt.c - `ccvm-oci checkpoint` and `restore`, as podman and containerd call
 * them: a checkpoint is a live ccvm snapshot, a restore a ccvm restore of it.
 *
 * CRIU freezes a container's whole process tree while it dumps it; ccvm snapshots
 * the VM live (ccow: a pause of milliseconds), so `checkpoint --leave-running` costs
 * the container next to nothing. The image is written by the monitor under the
 * container's record (the only place its confinement lets it write, decided before
 * --image-path was known) and then moved into --image-path, under a temporary name
 * renamed last, so that a checkpoint killed half-way leaves the previous one whole.
 * Beside it: the container's config (an image is restored under another name or
 * bundle) and inventory.img, a marker, because podman looks for CRIU's file of that
 * name before it restores (docs/oci.md).
 *
 * Incremental checkpoints, as podman's pre-checkpoint (--pre-dump, then
 * --parent-path): a pre-dump is a full snapshot taken with write tracking on, and the
 * monitor's image of it stays under the record as the anchor of a chain (track-N.img:
 * the VM's latest tracked snapshot, which an incremental one must name). A checkpoint
 * whose --parent-path holds that anchor's checkpoint is an incremental ccvm snapshot,
 * of the pages written since, into track-N+1.img; what goes to --image-path is the
 * chain merged into one full image, so a checkpoint restores, exports and imports
 * alone. A parent that is not this container's latest pre-dump (another container's,
 * or one from before a restore) gets a full checkpoint, as CRIU does without one.
 */
#include "cmd.h"

#include "../base/log.h"
#include "../snapshot/merge.h"
#include "../vmm/control.h"
#include "../vmm/ctl_proto.h"
#include "../vmm/version.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CKPT_IMAGE     "ccvm.img"      /* in --image-path: the snapshot image */
#define CKPT_RECORD    "ccvm-oci.json" /* in --image-path: what the checkpoint holds */
#define CKPT_INVENTORY "inventory.img" /* in --image-path: podman's marker */
#define CKPT_STAGING   "checkpoint.img" /* under the record: where the monitor writes */
#define CKPT_STATS     "stats-dump"    /* in --work-path: CRIU's statistics, for podman */
#define CKPT_TRACK     "track-%d.img"  /* under the record: a tracked chain's images */
#define CKPT_MAX_CHAIN 60              /* a chain's images at most (the reader's cap: 64) */
#define CKPT_LOADING   "still loading its memory" /* the control socket's reply, then */
#define CKPT_RETRY_MS  100
#define CKPT_RETRY_S   600 /* a lazy restore's load may take this long (a large VM) */

static const char ckpt_marker[] =
	"ccvm-oci checkpoint: not a CRIU image. podman looks for CRIU's inventory.img "
	"before it restores; the checkpoint is " CKPT_IMAGE ", a ccvm snapshot image, and "
	CKPT_RECORD " says what it holds.\n";

/* [@off, @end) of @in to the same place of @out: copy_file_range, or where the two
 * file systems cannot (tmpfs to tmpfs, on older kernels), read and write. */
static int copy_range(int in, int out, off_t off, off_t end)
{
	static char buf[1 << 16];

	while (off < end) {
		off_t o_in = off, o_out = off;
		ssize_t n = copy_file_range(in, &o_in, out, &o_out, (size_t)(end - off), 0);

		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
			      errno == EOPNOTSUPP)) {
			size_t want = (size_t)(end - off) < sizeof(buf) ? (size_t)(end - off) : sizeof(buf);

			n = pread(in, buf, want, off);
			if (n > 0 && pwrite(out, buf, (size_t)n, off) != n)
				return -EIO;
		}
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += n;
	}
	return 0;
}

/* @in's data into @out, its holes kept (an image is mostly holes: guest RAM never
 * touched): extent by extent (SEEK_DATA, SEEK_HOLE), then the size. */
static int copy_sparse(int in, int out)
{
	off_t size = lseek(in, 0, SEEK_END), off = 0, end;
	int rc;

	if (size < 0)
		return -errno;
	while (off < size && (off = lseek(in, off, SEEK_DATA)) >= 0) {
		end = lseek(in, off, SEEK_HOLE);
		if (end < 0)
			return -errno;
		if ((rc = copy_range(in, out, off, end)))
			return rc;
		off = end;
	}
	if (off < 0 && errno != ENXIO) /* ENXIO: no data past off */
		return -errno;
	return ftruncate(out, size) ? -errno : 0;
}

/* @src's bytes into a new @dst, holes kept, synced. 0 or -errno. */
static int copy_whole(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out, rc;

	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	rc = out < 0 ? -errno : copy_sparse(in, out);
	if (!rc && fsync(out))
		rc = -errno;
	close(in);
	if (out >= 0)
		close(out);
	return rc;
}

/* @src moved to @dst: renamed where they share a file system, else copied and the
 * source removed. */
static int move_file(const char *src, const char *dst)
{
	int rc;

	if (rename(src, dst) == 0)
		return 0;
	if (errno != EXDEV)
		return -errno;
	rc = copy_whole(src, dst);
	if (!rc)
		unlink(src);
	return rc;
}

/* @text into @dir/@name, whole (oci_write_file). */
static int write_whole(const char *dir, const char *name, const char *text, size_t n)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return oci_write_file(path, text, n, 0600);
}

/* What the checkpoint holds, beside the image: the container's config as its bundle
 * had it, the snapshot's figures, and, for a tracked one, its anchor (and whether it
 * was incremental); then the marker. */
static int ckpt_record(const struct oci_state *st, const char *dir, json_t *figures,
		       int anchor, bool incremental)
{
	char cfg_path[PATH_MAX + 16], *text;
	json_t *cfg, *rec;
	int rc;

	snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", st->bundle);
	cfg = json_load_file(cfg_path, JSON_REJECT_DUPLICATES, NULL);
	rec = json_pack("{s:s, s:s, s:s, s:s, s:o?, s:O?, s:b}", "ccvm", CCVM_VERSION, "id",
			st->id, "image", CKPT_IMAGE, "bundle", st->bundle, "config", cfg,
			"snapshot", figures, "incremental", incremental);
	if (rec && anchor >= 0)
		json_object_set_new(rec, "anchor", json_integer(anchor));
	text = rec ? json_dumps(rec, JSON_INDENT(1)) : NULL;
	json_decref(rec);
	if (!text)
		return -ENOMEM;
	rc = write_whole(dir, CKPT_RECORD, text, strlen(text));
	free(text);
	if (!rc)
		rc = write_whole(dir, CKPT_INVENTORY, ckpt_marker, sizeof(ckpt_marker) - 1);
	return rc;
}

/* @cmd to the VM's control socket: 0, or 1 with the reply said. A VM restored lazily
 * takes no snapshot until its memory is loaded: then the request is made again, for
 * as long as the load may take. */
static int ckpt_ctl(const struct oci_state *st, const char *cmd, int argc, char **argv,
		    json_t **out)
{
	char ctl[PATH_MAX + 16], *reply = malloc(CTL_MAX_LINE);
	int rc, tries = 0;

	if (!reply)
		return 1;
	snprintf(ctl, sizeof(ctl), "%s/%s", st->dir, OCI_CTL_FILE);
	do {
		if (tries)
			poll(NULL, 0, CKPT_RETRY_MS);
		reply[0] = '\0';
		rc = ctl_call(ctl, cmd, argc, argv, reply, NULL);
	} while (rc && strstr(reply, CKPT_LOADING) && ++tries < CKPT_RETRY_S * 1000 / CKPT_RETRY_MS);
	if (rc)
		log_err("checkpoint of %s: %s failed: %s", st->id, cmd, reply[0] ? reply : "no reply");
	else
		log_debug("checkpoint of %s: %s: %s", st->id, cmd, reply);
	if (!rc && out)
		*out = json_loads(reply, JSON_DISABLE_EOF_CHECK, NULL);
	free(reply);
	return rc ? 1 : 0;
}

/* The live snapshot into @file, which must not be there; with @track, writes tracked
 * after it; with @parent, only the pages written since that image (the VM's latest
 * tracked one). *@figures its reply (the pause, the duration, the bytes...), kept in
 * the checkpoint's record. Never compacted in idle time: the image is moved, merged
 * or archived by the checkpoint's caller at once, and a rewrite under it would race. */
static int ckpt_snapshot(const struct oci_state *st, const char *file, bool track,
			 const char *parent, json_t **figures)
{
	char *args[7] = { (char *)file, "--wait", "--compact", "off" };
	int n = 4;

	if (parent) {
		args[n++] = "--parent";
		args[n++] = (char *)parent;
	} else if (track) {
		args[n++] = "--track";
	}
	unlink(file);
	return ckpt_ctl(st, "snapshot", n, args, figures);
}

struct ckpt_args {
	const char *image_path, *work_path, *parent, *cgroups_mode, *empty_ns;
	bool leave, tcp, locks, ext_unix, shell, pre_dump, lazy, auto_dedup;
	const char *page_server, *status_fd;
};

/* CRIU's flags: accepted where they change nothing for a VM snapshot, refused where
 * they ask for something ccvm does not do. */
static int ckpt_refused(const struct ckpt_args *a)
{
	if (a->page_server)
		log_err("checkpoint --page-server: CRIU's page server; ccvm migrates a live VM "
			"with `ccvm ctl SOCK migrate` instead");
	else if (a->lazy)
		log_err("checkpoint --lazy-pages: CRIU's lazy migration; a ccvm restore is lazy "
			"by itself");
	else if (a->status_fd)
		log_err("checkpoint --status-fd: not supported");
	else
		return 0;
	return 1;
}

/* What --image-path gets from the monitor's image: the image itself (moved), a copy
 * of a tracked full one (which stays as the chain's anchor), or a tracked incremental
 * one's chain merged into a full image. */
enum ckpt_how { CKPT_MOVE, CKPT_COPY, CKPT_MERGE };

/* @src copied to @dst: a hard link where one file system holds both (an image is
 * never written again once complete), else its bytes. 0 or -errno. */
static int copy_file(const char *src, const char *dst)
{
	unlink(dst);
	return link(src, dst) == 0 ? 0 : copy_whole(src, dst);
}

/* The monitor's image @src into @tmp as @how says: 0 or -errno (said for a merge). */
static int ckpt_fill(const char *src, const char *tmp, enum ckpt_how how)
{
	char err[IMG_ERR_LEN];
	int rc;

	if (how == CKPT_MOVE)
		return move_file(src, tmp);
	if (how == CKPT_COPY)
		return copy_file(src, tmp);
	rc = img_merge(src, tmp, err);
	if (rc)
		log_err("checkpoint: merging the incremental snapshot with its parents: %s", err);
	return rc;
}

/* Into --image-path: the image under a temporary name, renamed last. */
static int ckpt_place(const struct oci_state *st, const char *staging, const char *dir,
		      json_t *figures, enum ckpt_how how, int anchor)
{
	char tmp[PATH_MAX + 32], dst[PATH_MAX + 32];
	int rc;

	if (mkdir(dir, 0700) && errno != EEXIST) {
		log_err("checkpoint --image-path %s: %s", dir, strerror(errno));
		return 1;
	}
	snprintf(tmp, sizeof(tmp), "%s/." CKPT_IMAGE ".tmp", dir);
	snprintf(dst, sizeof(dst), "%s/" CKPT_IMAGE, dir);
	rc = ckpt_fill(staging, tmp, how);
	if (!rc)
		rc = ckpt_record(st, dir, figures, anchor, how == CKPT_MERGE);
	if (!rc && rename(tmp, dst))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		log_err("checkpoint of %s into %s: %s", st->id, dir, strerror(-rc));
		return 1;
	}
	return 0;
}

/* The anchor of --parent-path @parent (relative to @image_path, as CRIU takes it):
 * N of ROOT/ID/track-N.img when that checkpoint is this container's tracked one, its
 * image still the VM's latest tracked snapshot; else -1, said: the checkpoint is full. */
static int ckpt_parent_anchor(const struct oci_state *st, const char *image_path,
			      const char *parent)
{
	char rec[2 * PATH_MAX + 32], file[PATH_MAX + 32], real[PATH_MAX], *tracked = NULL;
	json_t *j, *stats = NULL;
	const char *id, *why = NULL;
	json_int_t n = -1;

	snprintf(rec, sizeof(rec), "%s%s%s/" CKPT_RECORD, parent[0] == '/' ? "" : image_path,
		 parent[0] == '/' ? "" : "/", parent);
	j = json_load_file(rec, JSON_REJECT_DUPLICATES, NULL);
	id = json_string_value(json_object_get(j, "id"));
	if (json_is_integer(json_object_get(j, "anchor")))
		n = json_integer_value(json_object_get(j, "anchor"));
	if (!id || strcmp(id, st->id) != 0 || n < 0 || n > INT32_MAX)
		why = "it holds no tracked checkpoint of this container";
	else if (snprintf(file, sizeof(file), "%s/" CKPT_TRACK, st->dir, (int)n) < 0 ||
		 !realpath(file, real))
		why = "its snapshot is not this VM's (restored since?)";
	else if (ckpt_ctl(st, "stats", 0, NULL, &stats) ||
		 !(tracked = (char *)json_string_value(json_object_get(
			   json_object_get(stats, "snapshots"), "parent"))) ||
		 strcmp(tracked, real) != 0)
		why = "a later checkpoint was taken since";
	json_decref(j);
	json_decref(stats);
	if (!why)
		return (int)n;
	log_warn("checkpoint --parent-path %s: %s; a full checkpoint", parent, why);
	return -1;
}

/* The tracked images under the record: the highest N of track-N.img (-1: none) and
 * how many there are. */
static int ckpt_chain(const struct oci_state *st, int *count)
{
	DIR *d = opendir(st->dir);
	struct dirent *e;
	int top = -1, n;
	char end;

	*count = 0;
	while (d && (e = readdir(d)))
		if (sscanf(e->d_name, "track-%d.im%c", &n, &end) == 2 && end == 'g' && n >= 0) {
			++*count;
			top = n > top ? n : top;
		}
	if (d)
		closedir(d);
	return top;
}

/* A new chain begins at @from: the tracked images before it go. */
static void ckpt_prune(const struct oci_state *st, int from)
{
	char file[PATH_MAX + 32];
	int count;

	for (int n = ckpt_chain(st, &count); n >= 0; n--)
		if (n < from && snprintf(file, sizeof(file), "%s/" CKPT_TRACK, st->dir, n) > 0)
			unlink(file);
}

/* The snapshot and its place in --image-path. A pre-dump, or a checkpoint on this
 * container's latest pre-dump, is tracked: its image, named in @staging, stays under
 * the record as the chain's anchor (@staging is emptied then, so that it is kept).
 * 0, or 1 said. */
static int ckpt_take(const struct oci_state *st, const struct ckpt_args *a, char *staging,
		     size_t len, json_t **figures)
{
	char parent[PATH_MAX + 32];
	int count, top = ckpt_chain(st, &count), from = -1, anchor = -1;
	bool tracked;

	/* CRIU's --parent-path is relative to the image directory, which may be new */
	if (a->parent && (mkdir(a->image_path, 0700) == 0 || errno == EEXIST))
		from = ckpt_parent_anchor(st, a->image_path, a->parent);
	if (from >= 0 && count >= CKPT_MAX_CHAIN) {
		log_warn("checkpoint of %s: %d incremental checkpoints in a row; a full one", st->id,
			 count);
		from = -1;
	}
	tracked = a->pre_dump || from >= 0;
	if (tracked) {
		anchor = top + 1;
		snprintf(staging, len, "%s/" CKPT_TRACK, st->dir, anchor);
		snprintf(parent, sizeof(parent), "%s/" CKPT_TRACK, st->dir, from);
	}
	if (ckpt_snapshot(st, staging, tracked, from >= 0 ? parent : NULL, figures) ||
	    ckpt_place(st, staging, a->image_path, *figures,
		       !tracked ? CKPT_MOVE : from >= 0 ? CKPT_MERGE : CKPT_COPY, anchor))
		return 1;
	if (tracked) {
		if (from < 0)
			ckpt_prune(st, anchor); /* the VM's tracking moved to the new chain */
		staging[0] = '\0';
	}
	return 0;
}

int oci_cmd_checkpoint(const struct oci_global *g, int argc, char **argv)
{
	struct ckpt_args a = { 0 };
	const struct oci_flag flags[] = {
		{ "image-path", NULL, &a.image_path, NULL }, { "work-path", NULL, &a.work_path, NULL },
		{ "parent-path", NULL, &a.parent, NULL },   { "leave-running", NULL, NULL, &a.leave },
		{ "tcp-established", NULL, NULL, &a.tcp },  { "file-locks", NULL, NULL, &a.locks },
		{ "ext-unix-sk", NULL, NULL, &a.ext_unix }, { "shell-job", NULL, NULL, &a.shell },
		{ "pre-dump", NULL, NULL, &a.pre_dump },    { "lazy-pages", NULL, NULL, &a.lazy },
		{ "auto-dedup", NULL, NULL, &a.auto_dedup },
		{ "manage-cgroups-mode", NULL, &a.cgroups_mode, NULL },
		{ "empty-ns", NULL, &a.empty_ns, NULL },    { "page-server", NULL, &a.page_server, NULL },
		{ "status-fd", NULL, &a.status_fd, NULL },  { NULL, NULL, NULL, NULL },
	};
	char staging[PATH_MAX + 32];
	const char *pos[OCI_MAX_POS];
	int n = oci_flags_parse("checkpoint", argc, argv, flags, pos), rc = 1;
	struct oci_state st;
	enum oci_status s;
	json_t *figures = NULL;
	int lock = -1;
	bool paused;

	if (n != 1 || !a.image_path) {
		if (n >= 0)
			log_err("usage: ccvm-oci checkpoint --image-path DIR [--work-path DIR] "
				"[--leave-running] [--pre-dump] [--parent-path DIR] ID");
		return 1;
	}
	if (ckpt_refused(&a) || oci_load(g, pos[0], &st))
		return 1;
	snprintf(staging, sizeof(staging), "%s/%s", st.dir, CKPT_STAGING);
	/* one checkpoint at a time: they share the staging file */
	lock = open(st.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB)) {
		log_err("cannot checkpoint container %s: %s", st.id, lock < 0 ? strerror(errno) :
			"another checkpoint of it is under way");
		staging[0] = '\0';
		goto out;
	}
	s = oci_state_status(&st);
	if (s != OCI_RUNNING && s != OCI_PAUSED) {
		log_err("cannot checkpoint container %s: it is %s", st.id, oci_status_name(s));
		goto out;
	}
	/* A container that stops after it is checkpointed is paused first, as CRIU
	 * freezes it: nothing it does after the snapshot's instant is lost, or done twice
	 * when the image is restored. */
	paused = !a.leave && !a.pre_dump && s == OCI_RUNNING;
	if (paused && ckpt_ctl(&st, "pause", 0, NULL, NULL))
		goto out;
	if (ckpt_take(&st, &a, staging, sizeof(staging), &figures)) {
		if (paused) /* the container goes on as it was */
			ckpt_ctl(&st, "resume", 0, NULL, NULL);
		goto out;
	}
	/* podman exports CRIU's statistics from the work path with a checkpoint: an empty
	 * file is an empty record, which it reads as no figures */
	if (a.work_path)
		write_whole(a.work_path, CKPT_STATS, "", 0);
	/* a pre-dump leaves it running, as --leave-running does */
	rc = a.leave || a.pre_dump ? 0 : oci_kill_wait(&st);
out:
	if (staging[0])
		unlink(staging);
	if (lock >= 0)
		close(lock);
	json_decref(figures);
	oci_state_free(&st);
	return rc;
}

int oci_cmd_restore(const struct oci_global *g, int argc, char **argv)
{
	struct oci_create_args a = { .bundle = "." };
	const char *image_path = NULL, *work = NULL, *cg = NULL, *ns = NULL;
	bool detach = false, tcp = false, locks = false, ext = false, shell = false, lazy = false;
	bool no_subreaper = false;
	const struct oci_flag flags[] = {
		{ "bundle", "b", &a.bundle, NULL },        { "pid-file", NULL, &a.pid_file, NULL },
		{ "console-socket", NULL, &a.console, NULL }, { "image-path", NULL, &image_path, NULL },
		{ "work-path", NULL, &work, NULL },        { "detach", "d", NULL, &detach },
		{ "tcp-established", NULL, NULL, &tcp },   { "file-locks", NULL, NULL, &locks },
		{ "ext-unix-sk", NULL, NULL, &ext },       { "shell-job", NULL, NULL, &shell },
		{ "lazy-pages", NULL, NULL, &lazy },       { "manage-cgroups-mode", NULL, &cg, NULL },
		{ "empty-ns", NULL, &ns, NULL },           { "no-pivot", NULL, NULL, &a.no_pivot },
		{ "no-new-keyring", NULL, NULL, &a.no_keyring },
		/* runc's own reaper for a restored tree; a VM's processes are its own */
		{ "no-subreaper", NULL, NULL, &no_subreaper }, { NULL, NULL, NULL, NULL },
	};
	char image[PATH_MAX + 32];
	const char *pos[OCI_MAX_POS];
	int n = oci_flags_parse("restore", argc, argv, flags, pos), status;
	pid_t pid;

	if (n != 1 || !image_path) {
		if (n >= 0)
			log_err("usage: ccvm-oci restore --image-path DIR --bundle DIR [--pid-file F] "
				"[--detach] ID");
		return 1;
	}
	snprintf(image, sizeof(image), "%s/" CKPT_IMAGE, image_path);
	if (access(image, R_OK)) {
		log_err("restore --image-path %s: no ccvm checkpoint there (%s: %s); a CRIU "
			"checkpoint is not one", image_path, image, strerror(errno));
		return 1;
	}
	a.image = image;
	if (oci_create_from(g, pos[0], &a, &pid))
		return 1;
	if (detach)
		return 0;
	/* runc's restore without --detach stays until the container ends */
	if (waitpid(pid, &status, 0) < 0)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
