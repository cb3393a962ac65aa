/*
 * schedule.c - periodic snapshots (ccvm run --snapshot-every): started by the monitor
 * thread when due and the engine is idle, named by time so that pruning keeps the
 * newest --snapshot-keep. With --snapshot-incremental each is incremental on the last
 * snapshot taken with tracking (every --snapshot-full-every'th is full), and pruning
 * keeps every image a kept image needs.
 */
#include "engine_impl.h"
#include "image.h"
#include "../base/mono.h"
#include "../base/log.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SCHED_PREFIX "snapshot-"
#define SCHED_SUFFIX ".img"

#define SCHED_POLL_S 0.1 /* how soon to look again while a snapshot runs */

bool snap_schedule_on(const struct snap_schedule *s)
{
	return s && (s->every_s > 0 || s->gap_s > 0);
}

double snap_schedule_first(const struct snap_schedule *s, double now_s)
{
	return now_s + (s->gap_s > 0 ? s->gap_s : s->every_s);
}

/* With gap_s: the next snapshot is due gap_s after the last one (of any origin)
 * ended; none is due while one runs. */
static double sched_gap_due(struct snap_engine *e, const struct snap_schedule *s, double now_s,
			    double due_s)
{
	bool busy;
	double end;

	pthread_mutex_lock(&e->lock);
	busy = e->busy;
	end = e->last_end_s;
	pthread_mutex_unlock(&e->lock);
	if (busy)
		return now_s + SCHED_POLL_S;
	return end > 0 && end + s->gap_s > due_s ? end + s->gap_s : due_s;
}

/* --snapshot-incremental: track writes, and be incremental on the last tracked snapshot
 * unless this one is due full (the first, every full_every'th, or tracking was lost). */
static void sched_lineage(struct snap_engine *e, const struct snap_schedule *s,
			  struct snap_request *req, char *parent, size_t len)
{
	bool full;

	if (!s->incremental)
		return;
	req->track = true;
	pthread_mutex_lock(&e->lock);
	full = !e->track.tracking || (s->full_every > 0 && e->periodic_n % (uint64_t)s->full_every == 0);
	if (!full)
		snprintf(parent, len, "%s", e->track.file);
	pthread_mutex_unlock(&e->lock);
	req->parent = full ? NULL : parent;
}

double snap_schedule_tick(struct snap_engine *e, const struct snap_schedule *s, double now_s,
			  double due_s)
{
	struct snap_request req = s->req;
	struct snap_figures f = { 0 };
	char file[4096], stamp[32], err[512] = "", parent[4096];
	struct timespec rt;
	struct tm tm;

	if (!snap_schedule_on(s))
		return due_s;
	if (s->gap_s > 0)
		due_s = sched_gap_due(e, s, now_s, due_s);
	if (now_s < due_s)
		return due_s;
	clock_gettime(CLOCK_REALTIME, &rt);
	gmtime_r(&rt.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	/* Names sort by time, so pruning keeps the newest. */
	snprintf(file, sizeof(file), "%s/" SCHED_PREFIX "%s.%03ld" SCHED_SUFFIX, s->dir, stamp,
		 rt.tv_nsec / 1000000);
	req.file = file;
	sched_lineage(e, s, &req, parent, sizeof(parent));
	if (snap_start(e, &req, &f, err, sizeof(err)) == -EBUSY)
		return now_s + SCHED_POLL_S; /* the previous one is still being written: soon */
	if (f.id)
		e->periodic_n++;
	if (err[0] && !f.id)
		log_warn("periodic snapshot: %s", err);
	if (s->gap_s > 0)
		return now_s + SCHED_POLL_S; /* the next one is due once this one ended */
	return due_s + s->every_s > now_s ? due_s + s->every_s : now_s + s->every_s;
}

/* Is @path an ancestor of one of the newest s->keep images of @names (sorted)? An
 * image that cannot be opened needs nothing; one whose chain is broken already keeps
 * what is left of it. */
static bool sched_needed(const struct snap_schedule *s, char **names, size_t n, const char *path)
{
	char victim[PATH_MAX], file[4200], real[PATH_MAX], err[IMG_ERR_LEN];

	if (!realpath(path, victim))
		return false;
	for (size_t i = n > (size_t)s->keep ? n - (size_t)s->keep : 0; i < n; i++) {
		struct img_reader r;
		bool needed = false;

		if (!names[i])
			continue;
		snprintf(file, sizeof(file), "%s/%s", s->dir, names[i]);
		if (img_open(file, &r, err) != 0)
			continue;
		for (const struct img_reader *p = r.parent; p && !needed; p = p->parent) {
			char fd[64];
			ssize_t k;

			snprintf(fd, sizeof(fd), "/proc/self/fd/%d", p->fd);
			k = readlink(fd, real, sizeof(real) - 1);
			needed = k > 0 && (real[k] = 0, strcmp(real, victim) == 0);
		}
		img_close(&r);
		if (needed)
			return true;
	}
	return false;
}

static int sched_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void snap_schedule_prune(const struct snap_schedule *s)
{
	char **names = NULL, path[4200];
	size_t n = 0, cap = 0;
	struct dirent *d;
	DIR *dir;

	if (!snap_schedule_on(s) || !(dir = opendir(s->dir)))
		return;
	while ((d = readdir(dir))) {
		size_t len = strlen(d->d_name);

		if (strncmp(d->d_name, SCHED_PREFIX, strlen(SCHED_PREFIX)) != 0 ||
		    len < strlen(SCHED_SUFFIX) ||
		    strcmp(d->d_name + len - strlen(SCHED_SUFFIX), SCHED_SUFFIX) != 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof(*names));

			if (!nn)
				break;
			names = nn;
		}
		names[n++] = strdup(d->d_name);
	}
	closedir(dir);
	qsort(names, n, sizeof(*names), sched_cmp);
	for (size_t i = 0; i < n; i++) {
		if (names[i] && i + (size_t)s->keep < n) {
			snprintf(path, sizeof(path), "%s/%s", s->dir, names[i]);
			if (!sched_needed(s, names, n, path))
				unlink(path);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}
