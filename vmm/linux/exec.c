/*
 * exec.c - execve: the calling process goes on as a new program.
 *
 * What the guest passes (the path, argv, envp) is copied into monitor memory first,
 * each pointer and string read once. The program is opened in the guest's root, a
 * `#!` line followed to its interpreter (at most EXEC_MAX_SCRIPTS deep, as Linux's
 * binfmt_script nests), and the ELF and its interpreter parsed: any error up to there
 * is the guest's errno and leaves the process as it was. Then the point of no return:
 * the program's memory is given back (a snapshot in progress saves it first),
 * close-on-exec descriptors close, handled signals go back to their default (ignored
 * ones stay ignored), POSIX timers go, and the new image is loaded as the first
 * program was (lx_image_load). The thread resumes at its entry with registers cleared.
 * Pid, descriptors, working directory, umask, limits, the signal mask, pending
 * signals and the interval timer stay, as on Linux. A failure after the point of no
 * return ends the process with SIGSEGV, as Linux ends it.
 *
 * Not yet: a process with several threads (Linux ends the others; ccvm refuses with
 * EAGAIN and says so once), execveat, and the FPU state, which the new program finds
 * as the old one left it (Linux clears it).
 */
#include "exec.h"
#include "call.h"
#include "clock.h"
#include "fastio.h"
#include "fdtable.h"
#include "mm.h"
#include "path.h"
#include "proc.h"
#include "ptree.h"
#include "timer.h"
#include "../../base/log.h"
#include "../../mmu/layout.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXEC_MAX_SCRIPTS 4           /* #! interpreters that are scripts themselves */
#define EXEC_LINE_MAX 256            /* a #! line, as Linux's BINPRM_BUF_SIZE */
#define EXEC_BYTES_MAX (96ULL << 10) /* argv and envp strings: the new stack holds them */
#define EXEC_STRINGS_MAX 16384       /* pointers in argv or envp */

/* A string array in monitor memory. */
struct exec_strv {
	char **v;
	int n, cap;
};

/* An empty array, NULL-ended: 0 or -ENOMEM. */
static int exec_strv_init(struct exec_strv *a)
{
	a->cap = 16;
	a->n = 0;
	a->v = calloc((size_t)a->cap, sizeof(*a->v));
	return a->v ? 0 : -ENOMEM;
}

static void exec_strv_free(struct exec_strv *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

/* @s (copied) at index @at of @a: 0 or -ENOMEM. */
static int exec_strv_put(struct exec_strv *a, int at, const char *s)
{
	char *dup = strdup(s);

	if (!dup)
		return -ENOMEM;
	if (a->n + 2 > a->cap) {
		int cap = a->cap ? a->cap * 2 : 16;
		char **nv = realloc(a->v, (size_t)cap * sizeof(*nv));

		if (!nv) {
			free(dup);
			return -ENOMEM;
		}
		a->v = nv;
		a->cap = cap;
	}
	memmove(a->v + at + 1, a->v + at, (size_t)(a->n - at) * sizeof(*a->v));
	a->v[at] = dup;
	a->v[++a->n] = NULL;
	return 0;
}

/* The guest's NULL-ended array of strings at @uarr (0: none) into @a, adding their
 * bytes to *@bytes: 0, -EFAULT, -E2BIG or -ENOMEM. */
static int exec_strv_in(struct lx_call *c, uint64_t uarr, struct exec_strv *a, uint64_t *bytes)
{
	char *s = malloc(EXEC_BYTES_MAX + 1);
	int rc = s ? 0 : -ENOMEM;

	for (int i = 0; !rc && uarr; i++) {
		uint64_t ptr;
		size_t len;

		if (i >= EXEC_STRINGS_MAX) {
			rc = -E2BIG;
		} else if (lx_copy_in(c, &ptr, uarr + (uint64_t)i * sizeof(ptr), sizeof(ptr))) {
			rc = -EFAULT;
		} else if (!ptr) {
			break;
		} else {
			rc = gmem_copy_str(c->p->mem, s, ptr, EXEC_BYTES_MAX + 1, &len);
			if (rc == -ENAMETOOLONG || (!rc && (*bytes += len + 1) > EXEC_BYTES_MAX))
				rc = -E2BIG;
			if (!rc)
				rc = exec_strv_put(a, a->n, s);
		}
	}
	free(s);
	return rc;
}

/* The program at guest path @path, opened for reading and checked executable:
 * 0 with *@fd and @full (its joined guest path), or -errno. */
static int exec_open(struct lx_proc *p, const char *path, char full[PATH_MAX], int *fd)
{
	int rc = lx_path_join(p, AT_FDCWD, path, full);

	if (!rc)
		rc = lx_fs_open(NULL, &p->fs, full, O_RDONLY, 0, fd);
	if (rc)
		return rc;
	if (syscall(SYS_faccessat2, *fd, "", X_OK, AT_EMPTY_PATH) < 0) {
		rc = -errno;
		close(*fd);
	}
	return rc;
}

/* A `#!` line of the file behind @fd: 1 with the interpreter in @interp and its one
 * optional argument in @arg ("" when none), 0 when the file does not start with #!,
 * -ENOEXEC for a line with no interpreter or longer than EXEC_LINE_MAX. The file's end
 * ends the line too, as on Linux. */
static int exec_shebang(int fd, char interp[EXEC_LINE_MAX], char arg[EXEC_LINE_MAX])
{
	char line[EXEC_LINE_MAX + 1];
	ssize_t n = pread(fd, line, EXEC_LINE_MAX, 0);
	char *s, *end, *nl;

	if (n < 2 || line[0] != '#' || line[1] != '!')
		return 0;
	line[n] = '\0';
	nl = memchr(line, '\n', (size_t)n);
	if (!nl && n == EXEC_LINE_MAX)
		return -ENOEXEC;
	if (nl)
		*nl = '\0';
	for (s = line + 2; *s == ' ' || *s == '\t'; s++)
		;
	for (end = s; *end && *end != ' ' && *end != '\t'; end++)
		;
	if (end == s)
		return -ENOEXEC;
	memcpy(interp, s, (size_t)(end - s));
	interp[end - s] = '\0';
	for (s = end; *s == ' ' || *s == '\t'; s++)
		;
	for (end = s + strlen(s); end > s && (end[-1] == ' ' || end[-1] == '\t'); end--)
		;
	memcpy(arg, s, (size_t)(end - s));
	arg[end - s] = '\0';
	return 1;
}

/* Open what @path names, following #! lines: argv gets the interpreters in front, as
 * Linux puts them. 0 with *@fd open on the ELF and @full its guest path, or -errno. */
static int exec_resolve(struct lx_proc *p, const char *path, struct exec_strv *argv,
			char full[PATH_MAX], int *fd)
{
	char interp[EXEC_LINE_MAX], arg[EXEC_LINE_MAX], name[PATH_MAX];
	int rc;

	snprintf(name, sizeof(name), "%s", path);
	for (int depth = 0;; depth++) {
		rc = exec_open(p, name, full, fd);
		if (rc)
			return rc;
		rc = exec_shebang(*fd, interp, arg);
		if (rc == 0)
			return 0; /* not a script: the loader takes it from here */
		close(*fd);
		if (rc < 0)
			return rc;
		if (depth == EXEC_MAX_SCRIPTS)
			return -ELOOP;
		/* argv[0] gives way to: interpreter, its argument, the script's path */
		if (argv->n) {
			free(argv->v[0]);
			memmove(argv->v, argv->v + 1, (size_t)argv->n * sizeof(*argv->v));
			argv->n--;
		}
		rc = exec_strv_put(argv, 0, name);
		if (!rc && arg[0])
			rc = exec_strv_put(argv, 0, arg);
		if (!rc)
			rc = exec_strv_put(argv, 0, interp);
		if (rc)
			return rc;
		snprintf(name, sizeof(name), "%s", interp);
	}
}

/* How many threads the process has. */
static int exec_threads(struct lx_proc *p)
{
	int n = 0;

	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < LX_MAX_THREADS; i++)
		n += p->sigthr[i].tid != 0;
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* The old program's state let go of: memory, mapped files, the exitless path,
 * close-on-exec descriptors, handlers, POSIX timers, the thread's robust list and
 * alternate stack. */
static int exec_let_go(struct lx_call *c)
{
	struct lx_proc *p = c->p;
	struct lx_thread *t = c->t;
	int rc;

	lx_fastio_fini(p);
	pthread_mutex_lock(&p->lock);
	/* A vfork child has memory of its own by now, empty: the parent's stays as it is.
	 * Memory shared after a fork starts over as a whole, never copied to be dropped. */
	rc = 0;
	if (!p->vfork_parent && gmem_is_shared(p->mem) && p->hooks && p->hooks->process_reset)
		rc = p->hooks->process_reset(t->vcpu, p);
	if (!rc && !p->vfork_parent)
		rc = lx_mm_discard(p, LAYOUT_USER_BASE, p->mem->size);
	vma_map_free(&p->mm.map);
	lx_mfiles_close(p);
	lx_fd_close_on_exec(p);
	for (int sig = 1; sig <= LX_NSIG; sig++) {
		struct lx_sigaction *a = &p->sigact[sig];

		if (a->handler != (uint64_t)(uintptr_t)SIG_IGN)
			a->handler = (uint64_t)(uintptr_t)SIG_DFL;
		a->flags = a->restorer = a->mask = 0;
	}
	pthread_mutex_unlock(&p->lock);
	lx_timer_exec(p);
	t->robust_list = t->robust_len = t->clear_child_tid = 0;
	t->altstack_sp = t->altstack_size = 0;
	t->altstack_flags = SS_DISABLE;
	return rc;
}

/* Past the point of no return: the new image, and the thread at its entry. */
static int64_t exec_commit(struct lx_call *c, int fd, const char *full, struct exec_strv *argv,
			   struct exec_strv *envp)
{
	struct lx_proc *p = c->p;
	struct lx_config cfg = { .program = full, .argc = argv->n, .argv = argv->v,
				 .envp = envp->v, .hooks = p->hooks, .fastio = p->fastio_wanted,
				 .quiet = true };
	struct lx_entry entry;
	int rc = exec_let_go(c);

	snprintf(p->exe, sizeof(p->exe), "%s", full);
	if (!rc)
		rc = lx_image_load(p, &cfg, fd, &entry);
	if (!rc)
		lx_clock_publish(p); /* the new vDSO's data page reads the same clock */
	lx_vfork_release(p); /* its parent goes on, whatever came of the load */
	if (rc) {
		log_warn("execve of %s failed after the old program was gone (%s): the process "
			 "ends with SIGSEGV", full, strerror(-rc));
		p->exit_status = 128 + SIGSEGV;
		p->term_sig = SIGSEGV;
		c->action = LX_EXIT_GROUP;
		return 0;
	}
	memset(c->regs, 0, sizeof(*c->regs));
	c->regs->rip = entry.rip;
	c->regs->rsp = entry.rsp;
	c->regs->rflags = x86_user_rflags(0);
	c->segs->fs_base = c->segs->gs_base = 0;
	c->segs_dirty = true;
	c->t->resume_exact = true;
	return 0;
}

int64_t lx_execve(struct lx_call *c)
{
	struct exec_strv argv = { 0 }, envp = { 0 };
	struct lx_config cfg = { .quiet = true };
	char path[PATH_MAX], full[PATH_MAX];
	uint64_t bytes = 0;
	int fd = -1, n;
	int64_t rc;

	rc = exec_strv_init(&argv) || exec_strv_init(&envp) ? -ENOMEM : 0;
	if (!rc)
		rc = lx_upath(c, c->a[0], path);
	if (!rc)
		rc = exec_strv_in(c, c->a[1], &argv, &bytes);
	if (!rc)
		rc = exec_strv_in(c, c->a[2], &envp, &bytes);
	if (!rc && !argv.n) /* as Linux 5.18 on: an empty argv becomes { "" } */
		rc = exec_strv_put(&argv, 0, "");
	if (!rc)
		rc = exec_resolve(c->p, path, &argv, full, &fd);
	if (!rc) {
		cfg.program = full;
		rc = lx_image_check(c->p, &cfg, fd);
	}
	if (!rc && (n = exec_threads(c->p)) > 1) {
		if (lx_first_time(c))
			log_warn("guest called execve with %d threads running: ccvm does not end "
				 "the other threads yet, so it returns EAGAIN", n);
		rc = -EAGAIN;
	}
	/* A vfork child leaves its parent's memory for a window of its own: the last
	 * thing that may fail with the process as it was. */
	if (!rc && c->p->vfork_parent)
		rc = c->p->hooks->process_space(c->t->vcpu, c->p);
	if (!rc)
		rc = exec_commit(c, fd, full, &argv, &envp);
	if (fd >= 0)
		close(fd);
	exec_strv_free(&argv);
	exec_strv_free(&envp);
	return rc;
}
