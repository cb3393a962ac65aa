/*
 * proc.c - create the guest process: find the program, load it, lay out memory.
 *
 * Memory layout (guest virtual = guest physical; see mmu/layout.h):
 *
 *   0 .. 2 MiB            system area (supervisor only; NULL dereferences fault here)
 *   program               at its link address (PIE: at PROC_PIE_BASE)
 *   heap (brk)            grows up from the end of the program
 *   ...                   mmap hands out ranges top-down from mmap_top
 *   fastio area           (dynamic glibc programs) the exitless socket path's memory
 *   ELF interpreter       (dynamic programs) ld.so, right below the vDSO
 *   vDSO counters, data + image  below the stack
 *   stack                 the top of RAM, PROC_STACK_MAX at most
 */
#include "proc.h"
#include "clock.h"
#include "fastio.h"
#include "sysfilter.h"
#include "fdtable.h"
#include "lx.h"
#include "path.h"
#include "signal.h"
#include "signalfd.h"
#include "timer.h"
#include "elf.h"
#include "stack.h"
#include "../../base/log.h"
#include "../../base/x86.h"
#include "../../mmu/layout.h"
#include "../../guest/vdso/vdso_abi.h"
#include "../../guest/fastio/fastio_abi.h"

#include <cpuid.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PROC_STACK_MAX   (8ULL << 20)  /* RLIMIT_STACK as Linux sets it by default */
#define PROC_STACK_MIN   (256ULL << 10)
#define PROC_STACK_INIT  (128ULL << 10) /* room for argv, envp and auxv */
#define PROC_PIE_BASE    (4ULL << 20)
#define PROC_GAP         (64ULL << 10)  /* unmapped guard between regions */
#define PROC_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
/* Why a program cannot run: the user's to read at start, the guest's to see (an errno)
 * when its execve fails. */
#define PROC_LEVEL(cfg) ((cfg)->quiet ? LOG_DEBUG : LOG_ERR)

extern const uint8_t ccvm_vdso_image[], ccvm_vdso_image_end[];

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

static const char *proc_getenv(const struct lx_config *cfg, const char *name)
{
	size_t n = strlen(name);

	for (char *const *e = cfg->envp; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* Open the program as a shell would find it: a name with a slash is a path, a bare
 * name is looked up in the guest's PATH. */
static int proc_open_program(struct lx_proc *p, const struct lx_config *cfg, int *fd)
{
	const char *path = proc_getenv(cfg, "PATH");
	char gpath[PATH_MAX];
	int rc = -ENOENT;

	if (strchr(cfg->program, '/')) {
		rc = lx_path_join(p, AT_FDCWD, cfg->program, gpath);
		if (!rc)
			rc = lx_fs_open(NULL, &p->fs, gpath, O_RDONLY, 0, fd);
		goto found;
	}
	for (const char *dir = path ? path : PROC_DEFAULT_PATH; dir;) {
		const char *end = strchr(dir, ':');
		size_t len = end ? (size_t)(end - dir) : strlen(dir);

		if (len && snprintf(gpath, sizeof(gpath), "%.*s/%s", (int)len, dir, cfg->program) <
				   (int)sizeof(gpath)) {
			char full[PATH_MAX];

			if (lx_path_join(p, AT_FDCWD, gpath, full) == 0 &&
			    lx_fs_open(NULL, &p->fs, full, O_RDONLY, 0, fd) == 0) {
				strcpy(gpath, full);
				rc = 0;
				break;
			}
		}
		dir = end ? end + 1 : NULL;
	}
found:
	if (rc) {
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': %s", cfg->program,
			rc == -ENOENT ? "no such file (in the guest's root)" : strerror(-rc));
		return rc;
	}
	snprintf(p->exe, sizeof(p->exe), "%s", gpath);
	if (syscall(SYS_faccessat2, *fd, "", X_OK, AT_EMPTY_PATH) < 0) {
		rc = -errno;
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': %s", cfg->program, strerror(errno));
		close(*fd);
		return rc;
	}
	return 0;
}

/* Copy the PT_LOAD segments to guest memory and record them in the memory map. */
static int proc_load_segments(struct lx_proc *p, const uint8_t *file, const struct elf_info *e,
			      uint64_t base)
{
	for (int i = 0; i < e->n_loads; i++) {
		const struct elf_load *l = &e->loads[i];
		uint64_t start = (base + l->vaddr) & ~(PAGE_SIZE - 1);
		uint64_t end = align_up(base + l->vaddr + l->memsz, PAGE_SIZE);
		struct vma v = { .kind = VMA_PROGRAM,
				 .prot = ((l->flags & PF_R) ? PROT_READ : 0) |
					 ((l->flags & PF_W) ? PROT_WRITE : 0) |
					 ((l->flags & PF_X) ? PROT_EXEC : 0),
				 .flags = MAP_PRIVATE };
		uint8_t *dst = gmem_user_ptr(p->mem, base + l->vaddr, l->memsz);
		int rc;

		if (!dst)
			return -ENOMEM;
		memcpy(dst, file + l->offset, l->filesz);
		rc = vma_insert(&p->mm.map, start, end, &v);
		if (rc)
			return rc;
	}
	return 0;
}

/* Map the file behind @fd read-only and parse it as an ELF program; @what names it in
 * messages. On success *file / *size hold the mapping (munmap it). */
static int proc_parse_file(const struct lx_config *cfg, const char *what, int fd,
			   struct elf_info *e, uint8_t **file, size_t *size)
{
	char err[ELF_ERR_LEN];
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': not a regular file", what);
		return -EACCES;
	}
	if (st.st_size == 0) {
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': not an ELF file (it is empty)", what);
		return -ENOEXEC;
	}
	*size = (size_t)st.st_size;
	*file = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (*file == MAP_FAILED)
		return -errno;
	rc = elf_parse(*file, *size, e, err);
	if (rc) {
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': %s", what, err);
		munmap(*file, *size);
	}
	return rc;
}

/* Is [base + e->lo, base + e->hi) inside user memory below @top? */
static bool proc_fits(const struct elf_info *e, uint64_t base, uint64_t top)
{
	return base + e->lo >= LAYOUT_USER_BASE && base + e->hi <= top && base + e->hi > base + e->lo;
}

/*
 * A dynamic program's interpreter (PT_INTERP, ld-linux-x86-64.so.2), looked up in the
 * guest's root like any file, loaded right below the vDSO as Linux loads it at the top
 * of the mmap area; mmap_top moves below it. It must be position-independent and have
 * no interpreter of its own. Stores its load bias in *ibase and its entry in *ientry.
 */
static int proc_load_interp(struct lx_proc *p, const struct lx_config *cfg, const char *interp,
			    uint64_t *ibase, uint64_t *ientry)
{
	char gpath[PATH_MAX];
	struct elf_info ie;
	uint8_t *file;
	size_t size;
	int fd, rc;

	rc = lx_path_join(p, AT_FDCWD, interp, gpath);
	if (!rc)
		rc = lx_fs_open(NULL, &p->fs, gpath, O_RDONLY, 0, &fd);
	if (rc) {
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': its interpreter %s: %s", cfg->program, interp,
			rc == -ENOENT ? "no such file (in the guest's root)" : strerror(-rc));
		return rc;
	}
	rc = proc_parse_file(cfg, interp, fd, &ie, &file, &size);
	close(fd);
	if (rc)
		return rc;
	if (ie.interp[0] || !ie.is_pie) {
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': its interpreter %s is not a position-independent "
			"loader", cfg->program, interp);
		rc = -ENOEXEC;
		goto out;
	}
	*ibase = ((p->mm.mmap_top - (ie.hi - ie.lo)) & ~(ie.align - 1)) - ie.lo;
	if (!proc_fits(&ie, *ibase, p->mm.mmap_top)) {
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': no room for its interpreter (give a larger --mem)",
			cfg->program);
		rc = -ENOMEM;
		goto out;
	}
	rc = proc_load_segments(p, file, &ie, *ibase);
	*ientry = *ibase + ie.entry;
	p->mm.mmap_top = *ibase + ie.lo - PROC_GAP;
out:
	munmap(file, size);
	return rc;
}

static int proc_load_elf(struct lx_proc *p, const struct lx_config *cfg, int fd,
			 struct elf_info *e, uint64_t *base)
{
	uint8_t *file;
	size_t size;
	int rc;

	rc = proc_parse_file(cfg, cfg->program, fd, e, &file, &size);
	if (rc)
		return rc;
	*base = e->is_pie ? align_up(PROC_PIE_BASE, e->align) - e->lo : 0;
	if (!proc_fits(e, *base, p->mm.mmap_top)) {
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': it is linked at 0x%llx-0x%llx, outside this VM's user "
			"memory 0x%llx-0x%llx (give a larger --mem)", cfg->program,
			(unsigned long long)(*base + e->lo), (unsigned long long)(*base + e->hi),
			(unsigned long long)LAYOUT_USER_BASE, (unsigned long long)p->mm.mmap_top);
		rc = -ENOEXEC;
		goto out;
	}
	rc = proc_load_segments(p, file, e, *base);
out:
	munmap(file, size);
	return rc;
}

/* Stack at the top of RAM, the vDSO (counter page, data page, image) below it, mmap
 * below that. */
static int proc_layout(struct lx_proc *p)
{
	struct lx_mm *mm = &p->mm;
	uint64_t size = p->mem->size;
	uint64_t stack = size / 8 < PROC_STACK_MAX ? size / 8 : PROC_STACK_MAX;
	uint64_t image = align_up((uint64_t)(ccvm_vdso_image_end - ccvm_vdso_image), PAGE_SIZE);
	struct vma sv = { .kind = VMA_STACK, .prot = PROT_READ | PROT_WRITE,
			  .flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN };
	struct vma vv = { .kind = VMA_VDSO, .prot = PROT_READ | PROT_EXEC, .flags = MAP_PRIVATE };
	struct vma vc = { .kind = VMA_VDSO, .prot = PROT_READ | PROT_WRITE, .flags = MAP_PRIVATE };
	uint8_t *dst;
	int rc;

	if (stack < PROC_STACK_MIN)
		stack = PROC_STACK_MIN;
	vma_map_init(&mm->map, LAYOUT_USER_BASE, size);
	mm->stack_top = size;
	mm->stack_lo = size - stack;
	mm->vdso_base = mm->stack_lo - PROC_GAP - image;
	mm->mmap_top = mm->vdso_base - 2 * PAGE_SIZE - PROC_GAP;
	rc = vma_insert(&mm->map, mm->stack_lo, mm->stack_top, &sv);
	if (!rc)
		rc = vma_insert(&mm->map, mm->vdso_base - PAGE_SIZE, mm->vdso_base + image, &vv);
	if (!rc)
		rc = vma_insert(&mm->map, mm->vdso_base - 2 * PAGE_SIZE, mm->vdso_base - PAGE_SIZE, &vc);
	if (rc)
		return rc;
	dst = gmem_user_ptr(p->mem, mm->vdso_base, image);
	if (!dst)
		return -ENOMEM;
	memcpy(dst, ccvm_vdso_image, (size_t)(ccvm_vdso_image_end - ccvm_vdso_image));
	lx_clock_map(p);
	p->rlim[RLIMIT_STACK].rlim_cur = stack;
	return 0;
}

/*
 * The exitless socket path (fastio.c) for a dynamic glibc program: its shared area
 * goes below the interpreter, and the loader preloads the library that uses it.
 * Other programs (static, musl) make every call through the trap stub.
 */
static int proc_fastio(struct lx_proc *p, const char *interp)
{
	const char *base = strrchr(interp, '/');
	uint64_t size = lx_fastio_area_size(), at;
	struct vma v = { .kind = VMA_VDSO, .prot = PROT_READ | PROT_WRITE,
			 .flags = MAP_PRIVATE | MAP_ANONYMOUS };
	int rc;

	if (strncmp(base ? base + 1 : interp, "ld-linux", 8) != 0)
		return 0;
	if (p->mm.mmap_top < LAYOUT_USER_BASE + size + PROC_GAP)
		return 0; /* a tiny VM: no room to spare, and no need */
	at = (p->mm.mmap_top - size) & ~(PAGE_SIZE - 1);
	rc = vma_insert(&p->mm.map, at, at + size, &v);
	if (!rc)
		rc = lx_fastio_init(p, at, true);
	if (!rc)
		p->mm.mmap_top = at - PROC_GAP;
	return rc;
}

/* The exitless path serves read, write, writev, recv and send with no exit for a
 * seccomp profile to see: it is used only where the profile allows those whatever
 * their arguments. */
static bool proc_fastio_filtered_ok(const struct lx_filter *f)
{
	static const int calls[] = { __NR_read, __NR_write, __NR_writev, __NR_recvfrom,
				     __NR_sendto };

	for (size_t i = 0; f && i < sizeof(calls) / sizeof(calls[0]); i++)
		if (!lx_filter_allows_all(f, (uint64_t)calls[i]))
			return false;
	return true;
}

/* The program's environment, with the fastio library first in LD_PRELOAD when the
 * process has the exitless path (the library removes itself from it again). The
 * strings stay the caller's but for that one, stored in *own. NULL on allocation
 * failure; free the array and *own. */
static char **proc_env(struct lx_proc *p, const struct lx_config *cfg, int *envc, char **own)
{
	const char *old = proc_getenv(cfg, "LD_PRELOAD");
	int n = 0, out = 0;
	char **env;

	*own = NULL;
	for (char *const *ep = cfg->envp; ep && *ep; ep++)
		n++;
	env = calloc((size_t)n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (int i = 0; i < n; i++)
		if (!p->fio || strncmp(cfg->envp[i], "LD_PRELOAD=", 11) != 0)
			env[out++] = cfg->envp[i]; /* the user's LD_PRELOAD follows ours */
	if (p->fio) {
		if (asprintf(own, "LD_PRELOAD=%s%s%s", FASTIO_PATH, old ? ":" : "", old ? old : "") < 0) {
			free(env);
			return NULL;
		}
		env[out++] = *own;
	}
	*envc = out;
	return env;
}

static void proc_auxv(struct stack_args *a, uint64_t type, uint64_t val)
{
	a->auxv[a->n_auxv].type = type;
	a->auxv[a->n_auxv].val = val;
	a->n_auxv++;
}

static int proc_stack(struct lx_proc *p, const struct lx_config *cfg, const struct elf_info *e,
		      uint64_t base, uint64_t interp_base, uint64_t *rsp)
{
	unsigned eax, ebx, ecx, edx = 0;
	struct stack_args a = { .argc = cfg->argc, .argv = cfg->argv, .execfn = p->exe,
				.platform = "x86_64" };
	uint64_t init = PROC_STACK_INIT;
	char *own, **env = proc_env(p, cfg, &a.envc, &own);
	int rc;

	if (!env)
		return -ENOMEM;
	a.envp = env;
	if (getrandom(a.random, sizeof(a.random), 0) != sizeof(a.random)) {
		rc = -EIO;
		goto out;
	}
	__get_cpuid(1, &eax, &ebx, &ecx, &edx);
	proc_auxv(&a, AT_SYSINFO_EHDR, p->mm.vdso_base);
	proc_auxv(&a, AT_HWCAP, edx);
	proc_auxv(&a, AT_PAGESZ, PAGE_SIZE);
	proc_auxv(&a, AT_CLKTCK, 100);
	proc_auxv(&a, AT_PHDR, e->phdr_vaddr ? base + e->phdr_vaddr : 0);
	proc_auxv(&a, AT_PHENT, e->phentsize);
	proc_auxv(&a, AT_PHNUM, e->phnum);
	proc_auxv(&a, AT_BASE, interp_base);
	proc_auxv(&a, AT_FLAGS, 0);
	proc_auxv(&a, AT_ENTRY, base + e->entry);
	proc_auxv(&a, AT_UID, getuid());
	proc_auxv(&a, AT_EUID, geteuid());
	proc_auxv(&a, AT_GID, getgid());
	proc_auxv(&a, AT_EGID, getegid());
	proc_auxv(&a, AT_SECURE, 0);
	proc_auxv(&a, AT_HWCAP2, 0);
	if (p->fio)
		proc_auxv(&a, FASTIO_AUXV, lx_fastio_gva(p));
	if (init > p->mm.stack_top - p->mm.stack_lo)
		init = p->mm.stack_top - p->mm.stack_lo;
	rc = stack_build(gmem_user_ptr(p->mem, p->mm.stack_top - init, init), p->mm.stack_top, init,
			 &a, rsp);
	if (rc)
		log_msg(PROC_LEVEL(cfg), "cannot run '%s': arguments and environment do not fit in %llu KiB",
			cfg->program, (unsigned long long)(init >> 10));
out:
	free(own);
	free(env);
	return rc;
}

/* The monitor's limits, or those the command line gave; descriptors never past the
 * personality's table, whatever was asked. */
static void proc_rlimits(struct lx_proc *p, const struct lx_rlimits *given)
{
	for (int r = 0; r < RLIM_NLIMITS; r++) {
		if (given && (given->set & (1u << r)))
			p->rlim[r] = given->rlim[r];
		else
			getrlimit(r, &p->rlim[r]);
	}
	if (p->rlim[RLIMIT_NOFILE].rlim_max > LX_MAX_FDS)
		p->rlim[RLIMIT_NOFILE].rlim_max = LX_MAX_FDS;
	if (p->rlim[RLIMIT_NOFILE].rlim_cur > LX_MAX_FDS)
		p->rlim[RLIMIT_NOFILE].rlim_cur = LX_MAX_FDS;
}

/* (sys.h) */
int lx_image_check(struct lx_proc *p, const struct lx_config *cfg, int fd)
{
	struct elf_info e, ie;
	uint8_t *file;
	size_t size;
	int ifd, rc = proc_parse_file(cfg, cfg->program, fd, &e, &file, &size);

	if (rc)
		return rc;
	munmap(file, size);
	if (!e.interp[0])
		return 0;
	rc = lx_fs_open(NULL, &p->fs, e.interp, O_RDONLY, 0, &ifd);
	if (rc)
		return rc;
	rc = proc_parse_file(cfg, e.interp, ifd, &ie, &file, &size);
	close(ifd);
	if (rc)
		return rc;
	munmap(file, size);
	return ie.interp[0] || !ie.is_pie ? -ENOEXEC : 0;
}

/* (sys.h) */
int lx_image_load(struct lx_proc *p, const struct lx_config *cfg, int fd, struct lx_entry *entry)
{
	struct elf_info e;
	uint64_t base = 0, ibase = 0, ientry = 0;
	const char *slash;
	int rc = proc_layout(p);

	if (!rc)
		rc = proc_load_elf(p, cfg, fd, &e, &base);
	if (!rc && e.interp[0])
		rc = proc_load_interp(p, cfg, e.interp, &ibase, &ientry);
	if (!rc && e.interp[0] && cfg->fastio && proc_fastio_filtered_ok(p->filter))
		rc = proc_fastio(p, e.interp);
	if (rc)
		return rc;
	p->mm.brk_start = p->mm.brk = align_up(base + e.hi, PAGE_SIZE);
	rc = proc_stack(p, cfg, &e, base, ibase, &entry->rsp);
	if (rc)
		return rc;
	/* A dynamic program starts in its interpreter, which finds the program through
	 * AT_PHDR and AT_ENTRY. */
	entry->rip = e.interp[0] ? ientry : base + e.entry;
	slash = strrchr(p->exe, '/');
	memset(p->comm, 0, sizeof(p->comm));
	memcpy(p->comm, slash ? slash + 1 : p->exe,
	       strnlen(slash ? slash + 1 : p->exe, sizeof(p->comm) - 1));
	return 0;
}

int lx_proc_blank(struct lx_proc **out)
{
	struct lx_proc *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->fdt.lock, NULL);
	p->fs.root_fd = -1;
	rc = lx_sig_init(p);
	if (rc)
		goto err_lock;
	rc = lx_timer_init(p);
	if (rc)
		goto err_sig;
	/* The objects built on the signals hear of them through these alone. */
	p->sigwatch = (struct lx_sig_watch){ .pending = lx_sigfd_sync,
					     .timer_taken = lx_timer_taken,
					     .kicked = lx_timer_poke };
	*out = p;
	return 0;
err_sig:
	lx_sig_fini(p);
err_lock:
	pthread_mutex_destroy(&p->fdt.lock);
	pthread_mutex_destroy(&p->lock);
	free(p);
	return rc;
}

int lx_proc_create(struct gmem *mem, const struct lx_config *cfg, struct lx_proc **out,
		   struct lx_entry *entry)
{
	struct lx_proc *p;
	int fd = -1, rc = lx_proc_blank(&p);

	if (rc)
		return rc;
	p->mem = mem;
	p->hooks = cfg->hooks;
	p->filter = cfg->filter;
	p->pid = getpid();
	p->next_tid = p->pid + 1;
	p->sigthr[0].tid = p->pid; /* the first thread, known to signal senders */
	proc_rlimits(p, cfg->rlimits);
	rc = lx_fs_init(&p->fs, cfg->root, cfg->rw, cfg->n_rw);
	if (rc)
		goto err;
	if (cfg->net)
		p->net = *cfg->net;
	rc = lx_fd_init(p);
	if (rc)
		goto err;
	p->fastio_wanted = cfg->fastio;
	rc = proc_open_program(p, cfg, &fd);
	if (rc)
		goto err;
	rc = lx_image_load(p, cfg, fd, entry);
	close(fd);
	if (rc)
		goto err;
	/* exec keeps what its caller ignored (never SIGKILL or SIGSTOP). */
	for (int sig = 1; sig <= LX_NSIG; sig++)
		if ((cfg->ignored_signals >> (sig - 1) & 1) && sig != SIGKILL && sig != SIGSTOP)
			p->sigact[sig].handler = (uint64_t)(uintptr_t)SIG_IGN;
	*out = p;
	return 0;
err:
	lx_proc_free(p);
	return rc;
}

int lx_spawn_load(struct lx_proc *p, const struct lx_config *cfg, struct lx_entry *entry)
{
	int fd, rc = proc_open_program(p, cfg, &fd);

	if (rc)
		return rc;
	rc = lx_image_load(p, cfg, fd, entry);
	close(fd);
	if (!rc)
		lx_clock_publish(p); /* its vDSO reads the clock the others read */
	return rc;
}

/* (sys.h) */
void lx_mfiles_close(struct lx_proc *p)
{
	for (int i = 0; i < p->n_mfiles; i++) {
		if (p->mfiles[i] >= 0)
			close(p->mfiles[i]);
		free(p->mfile_paths[i]);
	}
	free(p->mfiles);
	free(p->mfile_paths);
	p->mfiles = NULL;
	p->mfile_paths = NULL;
	p->n_mfiles = 0;
}

void lx_proc_release(struct lx_proc *p)
{
	if (p->released)
		return;
	p->released = true;
	lx_fastio_fini(p);
	lx_fd_fini(p);
	lx_mfiles_close(p);
	vma_map_free(&p->mm.map);
	lx_fs_fini(&p->fs);
}

void lx_proc_free(struct lx_proc *p)
{
	if (!p)
		return;
	lx_proc_release(p);
	lx_timer_fini(p);
	lx_sigfd_fini(p);
	lx_sig_fini(p);
	pthread_mutex_destroy(&p->fdt.lock);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int lx_thread_init(struct lx_proc *p, struct lx_thread *t, void *vcpu)
{
	memset(t, 0, sizeof(*t));
	t->proc = p;
	t->tid = p->pid;
	t->vcpu = vcpu;
	return 0;
}
