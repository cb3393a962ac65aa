/*
 * state.c - the personality's part of a snapshot: what a process is besides its
 * memory and registers.
 *
 * Saved as JSON (readable with `ccvm inspect`): the program, working directory, root
 * and writable directories, file descriptors with how they were opened and where
 * their offsets stood, the memory map and heap, resource limits, signal dispositions,
 * the guest clock, signals pending and timers armed (times on their guest clocks,
 * which a restore carries on), and each thread's kernel-side fields (its id,
 * clear-tid word, signal mask and pending signals...). Restoring reopens regular
 * files by guest path and offset; the caller's stdin/stdout/stderr take the place of
 * the original ones; pipes cannot come back and are left closed.
 *
 * A saved state is data, never policy: the root, the writable directories and the
 * network rules come from the restoring command line (struct lx_restore_policy), and
 * lx_state_check refuses what ccvm could not have written (layout outside user RAM,
 * sockets a guest may not have) before anything is rebuilt.
 */
#include "fastio.h"
#include "fdstate.h"
#include "fdtable.h"
#include "lx.h"
#include "net.h"
#include "path.h"
#include "proc.h"
#include "shm.h"
#include "signal.h"
#include "signalfd.h"
#include "timer.h"
#include "../../base/log.h"
#include "../../mmu/layout.h"
#include "../../base/x86.h"

#include <ctype.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 2: every thread, the pid and the next thread id; 3: pending signals and timers */
#define STATE_VERSION        3
#define STATE_VERSION_OLDEST 2
#define STATE_SIGINFO_HEX    (2 * sizeof(siginfo_t))

static json_t *state_mm(struct lx_proc *p)
{
	json_t *vmas = json_array(), *files = json_array();

	for (int i = 0; i < p->mm.map.n; i++) {
		const struct vma *v = &p->mm.map.v[i];

		json_array_append_new(vmas, json_pack("[o, o, i, i, i, i, o]", lx_j_u64(v->start),
						      lx_j_u64(v->end), (int)v->prot, (int)v->flags,
						      (int)v->kind, v->file_id, lx_j_u64(v->file_off)));
	}
	for (int i = 0; i < p->n_mfiles; i++) {
		uint64_t ino;

		/* A memfd is in the image's shared memory, by its inode (shm.c). */
		if (lx_shm_memfd_ino(p->mfiles[i], &ino))
			json_array_append_new(files, json_pack("{s:o}", "shm", lx_j_u64(ino)));
		else
			json_array_append_new(files, p->mfile_paths[i] ?
							     json_string(p->mfile_paths[i]) :
							     json_null());
	}
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "vmas", vmas, "files",
			 files, "brk_start", lx_j_u64(p->mm.brk_start), "brk", lx_j_u64(p->mm.brk),
			 "mmap_top", lx_j_u64(p->mm.mmap_top), "stack_lo", lx_j_u64(p->mm.stack_lo),
			 "stack_top", lx_j_u64(p->mm.stack_top), "vdso_base", lx_j_u64(p->mm.vdso_base),
			 "ram_size", lx_j_u64(p->mem->size));
}

static json_t *state_signals_limits(struct lx_proc *p, json_t **limits)
{
	json_t *sig = json_array();

	*limits = json_array();
	for (int s = 1; s <= LX_NSIG; s++) {
		const struct lx_sigaction *a = &p->sigact[s];

		if (a->handler || a->flags || a->mask)
			json_array_append_new(sig, json_pack("[i, o, o, o, o]", s, lx_j_u64(a->handler),
							     lx_j_u64(a->flags), lx_j_u64(a->restorer),
							     lx_j_u64(a->mask)));
	}
	for (int r = 0; r < RLIM_NLIMITS; r++)
		json_array_append_new(*limits, json_pack("[o, o]", lx_j_u64(p->rlim[r].rlim_cur),
							 lx_j_u64(p->rlim[r].rlim_max)));
	return sig;
}

/* Queued signals, each siginfo as hex: the guest's own bytes, handed back as they were. */
static json_t *state_sigqueue(const struct lx_sigqueue *q)
{
	json_t *a = json_array();

	for (int i = 0; i < q->n; i++) {
		const uint8_t *b = (const uint8_t *)&q->q[i];
		char hex[STATE_SIGINFO_HEX + 1];

		for (size_t k = 0; k < sizeof(siginfo_t); k++)
			snprintf(hex + 2 * k, 3, "%02x", b[k]);
		json_array_append_new(a, json_string(hex));
	}
	return a;
}

static json_t *state_timers(const struct lx_proc *p)
{
	json_t *a = json_array();

	for (int id = 0; id <= LX_MAX_TIMERS; id++) {
		const struct lx_timer *t = &p->timers.t[id];

		if (!t->used)
			continue;
		json_array_append_new(a, json_pack("{s:i, s:i, s:i, s:i, s:i, s:o, s:b, s:o, s:o, s:i}",
						   "id", id, "clock", t->clock, "notify", t->notify,
						   "signo", t->signo, "tid", t->tid, "value",
						   lx_j_u64(t->value), "armed", t->armed, "deadline",
						   json_integer(t->deadline), "interval",
						   json_integer(t->interval), "overrun", t->overrun));
	}
	return a;
}

static json_t *state_thread(struct lx_proc *p, const struct lx_thread *t)
{
	const struct lx_sigthread *s = NULL;
	json_t *th;

	for (int i = 0; i < LX_MAX_THREADS && !s; i++)
		if (p->sigthr[i].tid == t->tid)
			s = &p->sigthr[i];
	th = json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:i}", "tid", t->tid,
			 "clear_child_tid", lx_j_u64(t->clear_child_tid), "robust_list",
			 lx_j_u64(t->robust_list), "robust_len", lx_j_u64(t->robust_len), "sigmask",
			 /* in rt_sigsuspend, which the restored thread makes again */
			 lx_j_u64(t->restore_mask ? t->saved_mask : t->sigmask), "altstack_sp", lx_j_u64(t->altstack_sp), "altstack_size",
			 lx_j_u64(t->altstack_size), "altstack_flags", (int)t->altstack_flags);
	if (s)
		json_object_set_new(th, "sigpending", state_sigqueue(&s->pend));
	return th;
}

static json_t *state_net(const struct lx_net *net)
{
	json_t *rules = json_array();

	for (int i = 0; i < net->n_rules; i++) {
		char spec[80];

		if (lx_net_format_publish(&net->rules[i], spec, sizeof(spec)) == 0)
			json_array_append_new(rules, json_string(spec));
	}
	return json_pack("{s:b, s:o}", "host", net->host, "publish", rules);
}

json_t *lx_state_save(struct lx_proc *p, struct lx_thread *const *threads, int n)
{
	json_t *rw = json_array(), *th = json_array(), *limits, *sig, *st;
	char cwd[PATH_MAX];

	lx_fs_cwd(&p->fs, cwd);
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < p->fs.n_rw; i++)
		json_array_append_new(rw, json_string(p->fs.rw_real[i]));
	for (int i = 0; i < n; i++)
		json_array_append_new(th, state_thread(p, threads[i]));
	sig = state_signals_limits(p, &limits);
	st = json_pack("{s:i, s:s, s:s, s:s, s:s, s:o, s:i, s:o, s:o, s:o, s:o, s:o, s:i, s:i, "
		       "s:o, s:o}",
		       "version", STATE_VERSION, "exe", p->exe, "comm", p->comm, "root",
		       p->fs.root_real, "cwd", cwd, "rw", rw, "umask", (int)lx_fs_umask(&p->fs),
		       "fds", lx_fdstate_save(p), "mm", state_mm(p), "rlimits", limits, "sigactions",
		       sig, "mono_ns", lx_j_u64(lx_clock_mono_ns(p)), "pid", p->pid, "next_tid",
		       p->next_tid, "threads", th, "net", state_net(&p->net));
	/* Where the exitless socket path's area is (0: none); its contents are RAM. */
	json_object_set_new(st, "fastio", lx_j_u64(lx_fastio_gva(p)));
	json_object_set_new(st, "sigpending", state_sigqueue(&p->sigpend));
	json_object_set_new(st, "timers", state_timers(p));
	pthread_mutex_unlock(&p->lock);
	return st;
}

/* ---- restore ---- */

struct rs {
	char *err;
	size_t errlen;
};

static int rs_fail(struct rs *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int rs_fail(struct rs *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, r->errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* The network policy is the restore's: --net host only from its command line; its
 * --publish rules, or else the saved rules that bind a loopback address (what
 * --publish gives by default), each said on stderr. A saved rule on another address
 * would expose the guest beyond this machine on the image's word: it needs the
 * restore's own --publish. */
static int restore_net(struct lx_proc *p, json_t *st, const struct lx_restore_policy *pol,
		       struct rs *r)
{
	json_t *net = json_object_get(st, "net"), *spec;
	size_t i;

	memset(&p->net, 0, sizeof(p->net));
	p->filter = pol->filter; /* the restore's command line's, never the image's */
	if (pol->net)
		p->net = *pol->net;
	if (pol->publish_given)
		return 0;
	json_array_foreach(json_object_get(net, "publish"), i, spec) {
		struct lx_publish rule;
		char err[LX_NET_ERR_LEN];
		const char *s = json_string_value(spec);

		if (!s || lx_net_parse_publish(s, &rule, err, sizeof(err)))
			return rs_fail(r, "process state: a bad saved publish rule");
		if (!lx_net_is_loopback((const struct sockaddr *)&rule.host_addr)) {
			log_warn("restore: the saved rule --publish %s binds a non-loopback address; "
				 "not reused (give --publish %s to restore it)", s, s);
			continue;
		}
		if (lx_net_add(&p->net, &rule))
			return rs_fail(r, "process state: a bad saved publish rule");
		log_warn("restore: reusing the saved rule --publish %s (--publish replaces the "
			 "saved rules)", s);
	}
	return 0;
}

/* Mapped file @v of a saved map: reopened by guest path, or the image's memfd. */
static int restore_mfile(struct lx_proc *p, json_t *v, const struct lx_restore_policy *pol)
{
	const char *path = json_string_value(v);
	int fd = -1;

	if (json_is_object(v)) {
		fd = lx_shm_restored(pol->shm, lx_ju(v, "shm"));
		if (fd < 0)
			log_warn("restore: a memfd the process mapped is not in the image; its "
				 "mappings are the process's own copy");
	} else if (path && lx_fs_open(NULL, &p->fs, path, O_RDONLY, 0, &fd) != 0) {
		fd = -1;
	}
	return fd;
}

static int restore_mm(struct lx_proc *p, json_t *mm, const struct lx_restore_policy *pol,
		      struct rs *r)
{
	json_t *vmas = json_object_get(mm, "vmas"), *files = json_object_get(mm, "files"), *v;
	uint64_t size = p->mem->size;
	size_t i;

	if (!json_is_array(vmas) || !json_is_array(files) || lx_ju(mm, "ram_size") != size)
		return rs_fail(r, "process state: memory map missing or for another RAM size");
	vma_map_init(&p->mm.map, LAYOUT_USER_BASE, size);
	p->mm.brk_start = lx_ju(mm, "brk_start");
	p->mm.brk = lx_ju(mm, "brk");
	p->mm.mmap_top = lx_ju(mm, "mmap_top");
	p->mm.stack_lo = lx_ju(mm, "stack_lo");
	p->mm.stack_top = lx_ju(mm, "stack_top");
	p->mm.vdso_base = lx_ju(mm, "vdso_base");
	p->n_mfiles = (int)json_array_size(files);
	p->mfiles = calloc((size_t)p->n_mfiles + 1, sizeof(int));
	p->mfile_paths = calloc((size_t)p->n_mfiles + 1, sizeof(char *));
	if (!p->mfiles || !p->mfile_paths)
		return -ENOMEM;
	json_array_foreach(files, i, v) {
		const char *path = json_string_value(v);

		p->mfiles[i] = restore_mfile(p, v, pol);
		p->mfile_paths[i] = path ? strdup(path) : NULL;
	}
	json_array_foreach(vmas, i, v) {
		struct vma e = { .prot = (uint32_t)json_integer_value(json_array_get(v, 2)),
				 .flags = (uint32_t)json_integer_value(json_array_get(v, 3)),
				 .kind = (enum vma_kind)json_integer_value(json_array_get(v, 4)),
				 .file_id = (int)json_integer_value(json_array_get(v, 5)),
				 .file_off = (uint64_t)json_integer_value(json_array_get(v, 6)) };
		uint64_t start = (uint64_t)json_integer_value(json_array_get(v, 0));
		uint64_t end = (uint64_t)json_integer_value(json_array_get(v, 1));

		if (json_array_size(v) != 7 || start >= end || start % PAGE_SIZE || end % PAGE_SIZE ||
		    !gmem_user_range_ok(p->mem, start, end - start) || e.kind < VMA_ANON ||
		    e.kind > VMA_SHM ||
		    (VMA_HAS_FILE(e.kind) && (e.file_id < 0 || e.file_id >= p->n_mfiles)))
			return rs_fail(r, "process state: memory map entry %zu is invalid", i);
		if (vma_insert(&p->mm.map, start, end, &e))
			return -ENOMEM;
	}
	lx_clock_map(p);
	return 0;
}

/* The exitless socket path again, at the same place; no connection came back, so it
 * starts with no fast socket. */
static int restore_fastio(struct lx_proc *p, uint64_t gva, struct rs *r)
{
	uint64_t size = lx_fastio_area_size();

	if (!gva)
		return 0;
	if (gva % PAGE_SIZE || gva + size < gva || !vma_range_mapped(&p->mm.map, gva, gva + size))
		return rs_fail(r, "process state: the fastio area is outside the memory map");
	return lx_fastio_init(p, gva, false);
}

static void restore_signals_limits(struct lx_proc *p, json_t *st)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(st, "sigactions"), i, v) {
		int s = (int)json_integer_value(json_array_get(v, 0));

		if (s < 1 || s > LX_NSIG)
			continue;
		p->sigact[s] = (struct lx_sigaction){
			.handler = (uint64_t)json_integer_value(json_array_get(v, 1)),
			.flags = (uint64_t)json_integer_value(json_array_get(v, 2)),
			.restorer = (uint64_t)json_integer_value(json_array_get(v, 3)),
			.mask = (uint64_t)json_integer_value(json_array_get(v, 4)),
		};
	}
	json_array_foreach(json_object_get(st, "rlimits"), i, v) {
		if (i >= RLIM_NLIMITS)
			break;
		p->rlim[i].rlim_cur = (rlim_t)json_integer_value(json_array_get(v, 0));
		p->rlim[i].rlim_max = (rlim_t)json_integer_value(json_array_get(v, 1));
	}
}

/* The file-system policy is the restore's (--root, --rw); the saved root must be the
 * restore's root, so saved paths and mapped files are never read from another tree. */
static int restore_fs(struct lx_proc *p, json_t *st, const struct lx_restore_policy *pol,
		      struct rs *r)
{
	const char *saved = json_string_value(json_object_get(st, "root"));
	int rc;

	rc = lx_fs_init(&p->fs, pol->root ? pol->root : "/", pol->rw, pol->n_rw);
	if (rc)
		return rs_fail(r, "--root or --rw: %s", strerror(-rc));
	if (!saved || strcmp(saved, p->fs.root_real) != 0)
		return rs_fail(r, "root: the image was taken with --root %s, this restore has "
			       "--root %s (restore with --root %s to accept it)", saved ?: "?",
			       p->fs.root_real, saved ?: "?");
	if (lx_fs_set_cwd(&p->fs, json_string_value(json_object_get(st, "cwd")) ?: "/"))
		return rs_fail(r, "cwd: longer than PATH_MAX");
	lx_fs_set_umask(&p->fs, (mode_t)lx_ju(st, "umask"));
	return 0;
}

/* A saved address must lie in user RAM. */
static bool state_user_addr(uint64_t v, uint64_t ram_size)
{
	return v >= LAYOUT_USER_BASE && v <= ram_size;
}

static int state_check_mm(json_t *mm, uint64_t ram_size, struct rs *r)
{
	static const char *const keys[] = { "brk_start", "brk", "mmap_top", "stack_lo",
					    "stack_top", "vdso_base" };
	json_t *f;
	size_t i;

	if (!json_is_object(mm) || lx_ju(mm, "ram_size") != ram_size)
		return rs_fail(r, "mm: memory map missing or for another RAM size");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!state_user_addr(lx_ju(mm, keys[i]), ram_size))
			return rs_fail(r, "mm.%s %#llx: outside user RAM (%#llx-%#llx)", keys[i],
				       (unsigned long long)lx_ju(mm, keys[i]),
				       (unsigned long long)LAYOUT_USER_BASE,
				       (unsigned long long)ram_size);
	if (lx_ju(mm, "brk") < lx_ju(mm, "brk_start") || lx_ju(mm, "stack_top") < lx_ju(mm, "stack_lo"))
		return rs_fail(r, "mm: the heap or the stack ends before it starts");
	json_array_foreach(json_object_get(mm, "files"), i, f)
		if (!json_is_string(f) && !json_is_null(f) &&
		    !(json_is_object(f) && json_is_integer(json_object_get(f, "shm"))))
			return rs_fail(r, "mm.files[%zu]: neither a path nor a memfd of the image", i);
	/* The vDSO's data page lies below it, inside user RAM. */
	if (lx_ju(mm, "vdso_base") < LAYOUT_USER_BASE + PAGE_SIZE ||
	    lx_ju(mm, "vdso_base") >= ram_size || lx_ju(mm, "vdso_base") % PAGE_SIZE)
		return rs_fail(r, "mm.vdso_base %#llx: not a page of user RAM with its data page below",
			       (unsigned long long)lx_ju(mm, "vdso_base"));
	return 0;
}

/* A siginfo in hex into @out: -EINVAL unless 128 bytes of a signal 1..LX_NSIG. */
static int state_siginfo(json_t *v, siginfo_t *out)
{
	const char *hex = json_string_value(v);
	uint8_t *b = (uint8_t *)out;

	if (!hex || strlen(hex) != STATE_SIGINFO_HEX)
		return -EINVAL;
	for (size_t k = 0; k < sizeof(siginfo_t); k++) {
		unsigned byte;

		if (!isxdigit((unsigned char)hex[2 * k]) || !isxdigit((unsigned char)hex[2 * k + 1]) ||
		    sscanf(hex + 2 * k, "%2x", &byte) != 1)
			return -EINVAL;
		b[k] = (uint8_t)byte;
	}
	return out->si_signo >= 1 && out->si_signo <= LX_NSIG ? 0 : -EINVAL;
}

/* A queue as state_sigqueue wrote it (absent: empty) into @q. */
static int state_sigqueue_load(json_t *a, struct lx_sigqueue *q)
{
	json_t *v;
	size_t i;

	*q = (struct lx_sigqueue){ 0 };
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > LX_SIGQUEUE_MAX)
		return -EINVAL;
	json_array_foreach(a, i, v) {
		if (state_siginfo(v, &q->q[q->n]))
			return -EINVAL;
		q->set |= 1ULL << (q->q[q->n].si_signo - 1);
		q->n++;
	}
	return 0;
}

static int state_timer_load(json_t *o, int *id, struct lx_timer *t)
{
	json_t *dl = json_object_get(o, "deadline"), *iv = json_object_get(o, "interval");

	if (!json_is_object(o) || !json_is_integer(dl) || !json_is_integer(iv))
		return -EINVAL;
	*id = (int)json_integer_value(json_object_get(o, "id"));
	*t = (struct lx_timer){
		.used = true,
		.clock = (int)json_integer_value(json_object_get(o, "clock")),
		.notify = (int)json_integer_value(json_object_get(o, "notify")),
		.signo = (int)json_integer_value(json_object_get(o, "signo")),
		.tid = (int)json_integer_value(json_object_get(o, "tid")),
		.value = lx_ju(o, "value"),
		.armed = json_is_true(json_object_get(o, "armed")),
		.deadline = json_integer_value(dl),
		.interval = json_integer_value(iv),
		.overrun = (int)json_integer_value(json_object_get(o, "overrun")),
	};
	return lx_timer_valid(*id, t) ? 0 : -EINVAL;
}

/* Signals pending (the process' and each thread's) and timers, as this ccvm writes
 * them: absent in version 2. */
static int state_check_signals(json_t *st, struct rs *r)
{
	struct lx_sigqueue q;
	struct lx_timer t;
	json_t *v, *timers = json_object_get(st, "timers");
	size_t i;
	int id;

	if (state_sigqueue_load(json_object_get(st, "sigpending"), &q))
		return rs_fail(r, "sigpending: not a queue of at most %d signals", LX_SIGQUEUE_MAX);
	json_array_foreach(json_object_get(st, "threads"), i, v)
		if (state_sigqueue_load(json_object_get(v, "sigpending"), &q))
			return rs_fail(r, "threads[%zu].sigpending: not a queue of at most %d "
				       "signals", i, LX_SIGQUEUE_MAX);
	if (timers && (!json_is_array(timers) || json_array_size(timers) > LX_MAX_TIMERS + 1))
		return rs_fail(r, "timers: not a list of at most %d timers", LX_MAX_TIMERS + 1);
	json_array_foreach(timers, i, v)
		if (state_timer_load(v, &id, &t))
			return rs_fail(r, "timers[%zu]: not a timer this ccvm makes (id, clock, "
				       "notification, signal or times)", i);
	return 0;
}

/* Pending signals of the process and its timers (checked by state_check_signals).
 * Timers start with the guest clock (lx_clock_resume), not before. */
static int restore_signals(struct lx_proc *p, json_t *st, struct rs *r)
{
	struct lx_timer t;
	json_t *v;
	size_t i;
	int id;

	if (state_sigqueue_load(json_object_get(st, "sigpending"), &p->sigpend))
		return rs_fail(r, "sigpending: damaged");
	pthread_mutex_lock(&p->lock);
	lx_sigfd_sync(p); /* the signalfds (fds) came back before their signals */
	pthread_mutex_unlock(&p->lock);
	json_array_foreach(json_object_get(st, "timers"), i, v) {
		if (state_timer_load(v, &id, &t))
			return rs_fail(r, "timers[%zu]: damaged", i);
		p->timers.t[id] = t;
	}
	return 0;
}

int lx_state_check(json_t *st, uint64_t ram_size, char *err, size_t errlen)
{
	struct rs r = { .err = err, .errlen = errlen };
	const char *root = json_string_value(json_object_get(st, "root"));
	int rc;

	if (!json_is_object(st) || lx_ju(st, "version") < STATE_VERSION_OLDEST ||
	    lx_ju(st, "version") > STATE_VERSION)
		return rs_fail(&r, "version %llu: this ccvm reads process state versions %d to %d",
			       (unsigned long long)lx_ju(st, "version"), STATE_VERSION_OLDEST,
			       STATE_VERSION);
	if (!root || root[0] != '/')
		return rs_fail(&r, "root: not an absolute directory");
	if (lx_state_threads(st) < 1)
		return rs_fail(&r, "threads: none");
	rc = state_check_mm(json_object_get(st, "mm"), ram_size, &r);
	if (!rc)
		rc = state_check_signals(st, &r);
	return rc ? rc : lx_fdstate_check(json_object_get(st, "fds"), err, errlen);
}

int lx_proc_restore(struct gmem *mem, json_t *st, const struct lx_restore_policy *pol,
		    struct lx_proc **out, char *err, size_t errlen)
{
	struct lx_proc *p;
	struct rs r = { .err = err, .errlen = errlen };
	int rc = lx_state_check(st, mem->size, err, errlen);

	if (rc)
		return rc;
	rc = lx_proc_blank(&p);
	if (rc)
		return rc;
	p->mem = mem;
	p->hooks = pol->hooks;
	if (lx_state_threads(st) < 1 || lx_ju(st, "pid") < 1 || lx_ju(st, "next_tid") <= lx_ju(st, "pid") ||
	    lx_ju(st, "next_tid") > INT_MAX) {
		rc = rs_fail(&r, "process state: no threads, or a bad pid or thread id");
		goto err;
	}
	/* The guest keeps the ids it had: its libc caches them (thread descriptors). */
	p->pid = (int)lx_ju(st, "pid");
	p->next_tid = (int)lx_ju(st, "next_tid");
	snprintf(p->exe, sizeof(p->exe), "%s", json_string_value(json_object_get(st, "exe")) ?: "");
	snprintf(p->comm, sizeof(p->comm), "%s", json_string_value(json_object_get(st, "comm")) ?: "");
	restore_signals_limits(p, st);
	rc = restore_net(p, st, pol, &r);
	if (!rc)
		rc = restore_fs(p, st, pol, &r);
	if (!rc)
		rc = lx_fd_init_empty(p);
	if (!rc && (rc = lx_fdstate_restore(p, json_object_get(st, "fds"), pol->pipes, pol->shm,
					    err, errlen)))
		goto err_msg;
	if (!rc)
		rc = restore_mm(p, json_object_get(st, "mm"), pol, &r);
	if (!rc)
		rc = lx_shm_map_all(p); /* over the memory restored: the files' bytes again */
	if (!rc)
		rc = restore_fastio(p, lx_ju(st, "fastio"), &r);
	if (rc)
		goto err;
	if (!rc)
		rc = restore_signals(p, st, &r);
	if (rc)
		goto err;
	p->clock.mono_base_ns = lx_ju(st, "mono_ns");
	*out = p;
	return 0;
err:
	if (rc != -EINVAL)
		snprintf(err, errlen, "%s", strerror(-rc));
err_msg:
	lx_proc_destroy(p);
	return rc;
}

/* Thread @tid known to senders again, with its pending signals (a checked queue). */
static int restore_thread_signals(struct lx_proc *p, int tid, json_t *pending)
{
	struct lx_sigqueue q;
	int rc = state_sigqueue_load(pending, &q);

	if (!rc)
		rc = lx_sig_thread_add(p, tid);
	if (!rc) {
		pthread_mutex_lock(&p->lock);
		for (int i = 0; i < LX_MAX_THREADS; i++)
			if (p->sigthr[i].tid == tid)
				p->sigthr[i].pend = q;
		lx_sigfd_sync(p);
		pthread_mutex_unlock(&p->lock);
	}
	return rc;
}

int lx_state_threads(json_t *st)
{
	json_t *th = json_object_get(st, "threads");

	return json_is_array(th) ? (int)json_array_size(th) : 0;
}

int lx_thread_restore(struct lx_proc *p, json_t *st, int i, struct lx_thread *t)
{
	json_t *th = json_array_get(json_object_get(st, "threads"), (size_t)i);

	if (!json_is_object(th) || lx_ju(th, "tid") < 1 || lx_ju(th, "tid") >= (uint64_t)p->next_tid)
		return -EINVAL;
	lx_thread_init(p, t, NULL);
	t->tid = (int)lx_ju(th, "tid");
	t->clear_child_tid = lx_ju(th, "clear_child_tid");
	t->robust_list = lx_ju(th, "robust_list");
	t->robust_len = lx_ju(th, "robust_len");
	t->sigmask = lx_ju(th, "sigmask");
	t->altstack_sp = lx_ju(th, "altstack_sp");
	t->altstack_size = lx_ju(th, "altstack_size");
	t->altstack_flags = (uint32_t)lx_ju(th, "altstack_flags");
	return restore_thread_signals(p, t->tid, json_object_get(th, "sigpending"));
}
