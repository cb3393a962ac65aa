/*
 * test_personality.c - the Linux personality on plain memory, no VM: a real process
 * (lx_proc_create loads /usr/bin/true and its ELF interpreter into a gmem), and its
 * system calls made through lx_syscall with a register set built here, as a vCPU's
 * exit would hand them over. Memory mapping, files and directories, descriptors,
 * pipes, epoll, futexes, clone, signals' bookkeeping and identity calls, each checked
 * against what Linux gives; then the process state saved, checked and restored into a
 * second memory, where the files and mappings are as they were. Signals: frames
 * read back through glibc's own ucontext_t and siginfo_t, rt_sigreturn from frames a
 * handler changed (hostile ones too), masks, queues, the alternate stack, threads.
 */
#include "suites.h"
#include "../../mmu/layout.h"
#include "../../vmm/linux/sys.h"
#include "../../vmm/vcpu.h"
#include "../../base/x86.h"
#include "../../guest/vdso/vdso_abi.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>

#define P_RAM      (64ULL << 20)
#define P_PROGRAM  "/usr/bin/true"
#define P_SCRATCH  (1ULL << 20) /* a guest mapping for arguments and results */
#define P_TSC_KHZ  1000000      /* the guest clock only needs to run forward here */
#define P_ARENA    (256ULL << 10)

static struct gmem pmem;
static struct lx_proc *pp;
static struct lx_thread pt;
static char pdir[] = "/tmp/ccvm-persona-XXXXXX";
static uint64_t scratch;        /* guest address of the scratch mapping */
static int discards, clones;
static struct lx_clone last_clone;

static void hook_discard(void *ctx, uint64_t gpa, uint64_t len)
{
	(void)ctx;
	(void)gpa;
	(void)len;
	discards++;
}

static int hook_thread(void *parent_vcpu, const struct lx_clone *cl)
{
	(void)parent_vcpu;
	last_clone = *cl;
	clones++;
	return 0;
}

static const struct lx_hooks p_hooks = { .before_discard = hook_discard,
					 .thread_create = hook_thread };

static int64_t psys_on(struct lx_thread *t, uint64_t nr, uint64_t a0, uint64_t a1, uint64_t a2,
		       uint64_t a3, uint64_t a4, uint64_t a5, enum lx_action *act)
{
	struct cpu_regs regs = { .rax = nr, .rdi = a0, .rsi = a1, .rdx = a2, .r10 = a3,
				 .r8 = a4, .r9 = a5 };
	struct cpu_segs sregs = { 0 };
	bool dirty = false;
	enum lx_action a = lx_syscall(t, &regs, &sregs, &dirty);

	if (act)
		*act = a;
	return (int64_t)regs.rax;
}

static int64_t psys(uint64_t nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
		    uint64_t a4, uint64_t a5)
{
	return psys_on(&pt, nr, a0, a1, a2, a3, a4, a5, NULL);
}

#define S0(nr) psys(nr, 0, 0, 0, 0, 0, 0)
#define S1(nr, a) psys(nr, (uint64_t)(a), 0, 0, 0, 0, 0)
#define S2(nr, a, b) psys(nr, (uint64_t)(a), (uint64_t)(b), 0, 0, 0, 0)
#define S3(nr, a, b, c) psys(nr, (uint64_t)(a), (uint64_t)(b), (uint64_t)(c), 0, 0, 0)
#define S4(nr, a, b, c, d) psys(nr, (uint64_t)(a), (uint64_t)(b), (uint64_t)(c), (uint64_t)(d), 0, 0)
#define S6(nr, a, b, c, d, e, f)                                                          \
	psys(nr, (uint64_t)(a), (uint64_t)(b), (uint64_t)(c), (uint64_t)(d), (uint64_t)(e), \
	     (uint64_t)(f))

/* Host pointer to guest user address @gva (the scratch area and mappings). */
static void *gp(uint64_t gva, uint64_t len)
{
	void *h = gmem_user_ptr(&pmem, gva, len);

	ck_assert_ptr_nonnull(h);
	return h;
}

/* Put string @s at scratch offset @off; its guest address. */
static uint64_t gstr(uint64_t off, const char *s)
{
	strcpy(gp(scratch + off, strlen(s) + 1), s);
	return scratch + off;
}

/* A path under the test directory, in the guest's scratch area at @off. */
static uint64_t gpath(uint64_t off, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", pdir, name);
	return gstr(off, path);
}

static void p_setup(void)
{
	const char *rw[] = { pdir };
	char *argv[] = { "true", NULL }, *envp[] = { "A=1", NULL };
	struct lx_config cfg = { .program = P_PROGRAM, .argc = 1, .argv = argv, .envp = envp,
				 .root = "/", .rw = rw, .n_rw = 1, .hooks = &p_hooks };
	struct lx_entry entry;

	ck_assert_ptr_nonnull(mkdtemp(pdir));
	ck_assert_int_eq(gmem_map(&pmem, P_RAM), 0);
	ck_assert_int_eq(lx_proc_create(&pmem, &cfg, &pp, &entry), 0);
	ck_assert_uint_ne(entry.rip, 0);
	ck_assert(gmem_user_range_ok(&pmem, entry.rsp - 8, 8));
	lx_clock_init(pp, 0, P_TSC_KHZ);
	lx_thread_init(pp, &pt, NULL);
	discards = clones = 0;
	scratch = (uint64_t)S6(SYS_mmap, 0, P_SCRATCH, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(gmem_user_range_ok(&pmem, scratch, P_SCRATCH));
}

static void p_teardown(void)
{
	char cmd[PATH_MAX + 16];

	lx_proc_destroy(pp);
	gmem_unmap(&pmem);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", pdir);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(pdir, "/tmp/ccvm-persona-XXXXXX");
}

/* The paths object's own state, under its own lock: the working directory and umask
 * set and read back, a path too long refused with nothing changed, and fork's copy
 * its own (a change in it leaves the parent's). */
START_TEST(test_paths_cwd_umask)
{
	struct lx_fs fs, copy;
	char cwd[PATH_MAX], longpath[PATH_MAX + 8];
	mode_t saved = umask(0);

	umask(saved);
	ck_assert_int_eq(lx_fs_init(&fs, "/", NULL, 0), 0);
	ck_assert_int_eq(lx_fs_set_cwd(&fs, "/tmp"), 0);
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = 0;
	ck_assert_int_eq(lx_fs_set_cwd(&fs, longpath), -ENAMETOOLONG);
	lx_fs_cwd(&fs, cwd);
	ck_assert_str_eq(cwd, "/tmp");
	lx_fs_set_umask(&fs, 022);
	ck_assert_int_eq(lx_fs_set_umask(&fs, 077), 022);
	ck_assert_int_eq(lx_fs_umask(&fs), 077);
	ck_assert_int_eq(lx_fs_copy(&copy, &fs), 0);
	ck_assert_int_eq(lx_fs_set_cwd(&copy, "/"), 0);
	lx_fs_set_umask(&copy, 0);
	lx_fs_cwd(&fs, cwd);
	ck_assert_str_eq(cwd, "/tmp");
	ck_assert_int_eq(lx_fs_umask(&fs), 077);
	lx_fs_cwd(&copy, cwd);
	ck_assert_str_eq(cwd, "/");
	lx_fs_fini(&copy);
	lx_fs_fini(&fs);
	umask(saved); /* lx_fs_init set the monitor's own to 0, as a run does */
}
END_TEST

/* The process as lx_proc_create left it: its name, a program break, a stack. */
START_TEST(test_process_created)
{
	ck_assert_str_eq(pp->comm, "true");
	ck_assert_str_eq(pp->exe, P_PROGRAM);
	ck_assert_uint_gt(pp->mm.brk_start, 0);
	ck_assert_uint_eq(pp->mm.brk, pp->mm.brk_start);
	ck_assert_uint_gt(pp->mm.stack_top, pp->mm.stack_lo);
	ck_assert_int_eq(S0(SYS_getpid), getpid());
	ck_assert_int_eq(S0(SYS_gettid), getpid());
}
END_TEST

/* mmap, mprotect, mremap, madvise, munmap and brk as Linux answers them. */
START_TEST(test_memory_calls)
{
	int64_t a = S6(SYS_mmap, 0, P_ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int64_t b, brk0;
	uint8_t *h;

	ck_assert_int_gt(a, 0);
	ck_assert_int_eq(a % 4096, 0);
	h = gp((uint64_t)a, P_ARENA);
	ck_assert_int_eq(h[100], 0);
	memset(h, 0x5a, P_ARENA);
	ck_assert_int_eq(S3(SYS_mprotect, a, 4096, PROT_READ), 0);
	ck_assert_int_eq(S3(SYS_mprotect, a + 1, 4096, PROT_READ), -EINVAL);
	/* DONTNEED gives the memory back: it reads as zero, a snapshot was told first. */
	ck_assert_int_eq(S3(SYS_madvise, a, 8192, MADV_DONTNEED), 0);
	ck_assert_int_gt(discards, 0);
	ck_assert_int_eq(h[0], 0);
	ck_assert_int_eq(h[8192], 0x5a);
	/* Linux refuses to move a range that spans two mappings (the mprotect split it). */
	ck_assert_int_eq(S4(SYS_mremap, a, P_ARENA, 2 * P_ARENA, MREMAP_MAYMOVE), -EFAULT);
	b = S4(SYS_mremap, a + 4096, P_ARENA - 4096, 2 * P_ARENA, MREMAP_MAYMOVE);
	ck_assert_int_gt(b, 0);
	ck_assert_int_eq(((uint8_t *)gp((uint64_t)b, 2 * P_ARENA))[4096], 0x5a);
	ck_assert_int_eq(S2(SYS_munmap, b, 2 * P_ARENA), 0);
	ck_assert_int_eq(S2(SYS_munmap, a, 4096), 0);
	ck_assert_int_eq(S6(SYS_mmap, 0, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), -EINVAL);
	ck_assert_int_eq(S6(SYS_mmap, 0, 4096, PROT_READ, MAP_PRIVATE, 77, 0), -EBADF);
	ck_assert_int_eq(S2(SYS_munmap, 4097, 4096), -EINVAL);

	brk0 = S1(SYS_brk, 0);
	ck_assert_int_eq(brk0, (int64_t)pp->mm.brk_start);
	ck_assert_int_eq(S1(SYS_brk, brk0 + 3 * 4096), brk0 + 3 * 4096);
	memset(gp((uint64_t)brk0, 3 * 4096), 1, 3 * 4096);
	ck_assert_int_eq(S1(SYS_brk, brk0 + 4096), brk0 + 4096);
	ck_assert_int_eq(S1(SYS_brk, brk0 - 4096), brk0 + 4096); /* below the start: unchanged */
	ck_assert_int_eq(S1(SYS_brk, 1ULL << 62), brk0 + 4096);
}
END_TEST

/* Shared mappings (shm.c) on plain memory: a memfd's bytes are the same through
 * write and its mapping; a mapped memfd does not shrink under the mapping; MADV_DONTNEED
 * keeps a shared mapping's bytes and munmap leaves zeros; a shared anonymous mapping is
 * a memfd of ccvm's own; the snapshot section holds each memfd once, comes back with
 * its bytes, and a damaged one is refused. */
/* lx_shm_save's records gathered, as a test reads them back. */
struct shm_gathered {
	uint8_t *data;
	size_t len;
	int puts;
};

static int shm_gather(void *ctx, const void *head, size_t head_len, const void *data,
		      size_t len)
{
	struct shm_gathered *g = ctx;
	uint8_t *d = realloc(g->data, g->len + head_len + len);

	if (!d)
		return -ENOMEM;
	if (head_len)
		memcpy(d + g->len, head, head_len);
	if (len)
		memcpy(d + g->len + head_len, data, len);
	g->data = d;
	g->len += head_len + len;
	g->puts++;
	return 0;
}

/* The section @sec (@len bytes, one memfd of inode @ino) arriving in pieces, as a
 * migration brings it: a byte at a time through its head and name, then the rest in
 * two: the memfd comes out whole. Cut short, twice, or claiming more than the section
 * may hold, it is refused. */
static void shm_pieces_check(const uint8_t *sec, size_t len, uint64_t ino)
{
	struct lx_shm_in in;
	json_t *reg = NULL;
	char err[256], buf[32];
	size_t at = 0;
	int back;

	lx_shm_in_init(&in, 1 << 20);
	for (; at < 300; at++)
		ck_assert_int_eq(lx_shm_in_put(&in, sec + at, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(lx_shm_in_put(&in, sec + at, 5000, err, sizeof(err)), 0);
	ck_assert_int_eq(lx_shm_in_put(&in, sec + at + 5000, len - at - 5000, err, sizeof(err)),
			 0);
	ck_assert_int_eq(lx_shm_in_end(&in, &reg, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(reg);
	back = lx_shm_restored(reg, ino);
	ck_assert_int_ge(back, 0);
	ck_assert_int_eq(lseek(back, 0, SEEK_END), 16384);
	ck_assert_int_eq(pread(back, buf, 19, 0), 19);
	ck_assert_int_eq(memcmp(buf, "through the mapping", 19), 0);
	close(back);
	lx_shm_restored_close(reg);
	lx_shm_in_free(&in);

	lx_shm_in_init(&in, 1 << 20);
	ck_assert_int_eq(lx_shm_in_put(&in, sec, len - 1, err, sizeof(err)), 0);
	ck_assert_int_eq(lx_shm_in_end(&in, &reg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "cut short"));
	lx_shm_in_free(&in);

	lx_shm_in_init(&in, 1 << 20);
	ck_assert_int_eq(lx_shm_in_put(&in, sec, len, err, sizeof(err)), 0);
	ck_assert_int_eq(lx_shm_in_put(&in, sec, len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "twice"));
	lx_shm_in_free(&in);

	lx_shm_in_init(&in, 8192); /* a 16 KiB memfd cannot come within 8 KiB */
	ck_assert_int_eq(lx_shm_in_put(&in, sec, 300, err, sizeof(err)), -EINVAL);
	lx_shm_in_free(&in);
}

START_TEST(test_shared_calls)
{
	char *buf = gp(scratch + 0x8000, 4096), err[256];
	uint8_t *h, *sec = NULL, *twice;
	struct shm_gathered got = { 0 };
	uint64_t ino;
	json_t *reg = NULL;
	int64_t fd, m, a;
	size_t len = 0;
	int back, id, n;

	fd = S2(SYS_memfd_create, gstr(0, "unit"), MFD_CLOEXEC);
	ck_assert_int_ge(fd, 3);
	ck_assert_int_eq(S2(SYS_memfd_create, gstr(0, "unit"), MFD_HUGETLB), -EINVAL);
	ck_assert_int_eq(S2(SYS_ftruncate, fd, 8192), 0);
	strcpy(buf, "through write");
	ck_assert_int_eq(S4(SYS_pwrite64, fd, scratch + 0x8000, 13, 4096), 13);
	m = S6(SYS_mmap, 0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_int_gt(m, 0);
	ck_assert_int_eq(vma_find(&pp->mm.map, (uint64_t)m)->kind, VMA_SHM);
	h = gp((uint64_t)m, 8192);
	ck_assert_int_eq(memcmp(h + 4096, "through write", 13), 0);
	memcpy(h, "through the mapping", 19);
	ck_assert_int_eq(S4(SYS_pread64, fd, scratch + 0x8100, 19, 0), 19);
	ck_assert_int_eq(memcmp(buf + 0x100, "through the mapping", 19), 0);
	ck_assert_int_eq(S2(SYS_ftruncate, fd, 4096), -EBUSY);
	ck_assert_int_eq(S2(SYS_ftruncate, fd, 16384), 0);
	ck_assert_int_eq(S3(SYS_madvise, m, 4096, MADV_DONTNEED), 0);
	ck_assert_int_eq(h[0], 't');

	ck_assert_int_eq(lx_shm_save(&pp, 1, 16384, shm_gather, &(struct shm_gathered){ 0 }),
			 -E2BIG);
	ck_assert_int_eq(lx_shm_save(&pp, 1, 1 << 20, shm_gather, &got), 0);
	sec = got.data;
	len = got.len;
	ck_assert_int_eq(got.puts, 1); /* a head and 16 KiB: one piece */
	ck_assert_uint_gt(len, 16384);
	ck_assert_int_eq(lx_shm_check(sec, len, err, sizeof(err)), 0);
	ck_assert_int_eq(lx_shm_check(sec, len - 1, err, sizeof(err)), -EINVAL);
	twice = malloc(2 * len);
	memcpy(twice, sec, len);
	memcpy(twice + len, sec, len);
	ck_assert_int_eq(lx_shm_check(twice, 2 * len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "twice"));
	free(twice);
	ck_assert_int_eq(lx_shm_restore(sec, len, &reg), 0);
	ck_assert(lx_shm_memfd_ino(pp->fdt.files[fd].host_fd, &ino));
	back = lx_shm_restored(reg, ino);
	ck_assert_int_ge(back, 0);
	ck_assert_int_eq(lseek(back, 0, SEEK_END), 16384);
	ck_assert_int_eq(pread(back, buf + 0x200, 19, 0), 19);
	ck_assert_int_eq(memcmp(buf + 0x200, "through the mapping", 19), 0);
	ck_assert_int_eq(lx_shm_restored(reg, ino + 1), -1);
	close(back);
	lx_shm_restored_close(reg);
	shm_pieces_check(sec, len, ino);
	free(sec);

	ck_assert_int_eq(S2(SYS_munmap, m, 8192), 0);
	ck_assert_int_eq(h[0], 0);
	ck_assert_int_eq(S2(SYS_ftruncate, fd, 0), 0); /* mapped by nobody now */
	ck_assert_int_eq(S1(SYS_close, fd), 0);

	a = S6(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_int_gt(a, 0);
	ck_assert_int_eq(vma_find(&pp->mm.map, (uint64_t)a)->kind, VMA_SHM);
	h = gp((uint64_t)a, 4096);
	h[0] = 9;
	id = vma_find(&pp->mm.map, (uint64_t)a)->file_id;
	ck_assert(lx_shm_memfd_ino(pp->mfiles[id], &ino));
	ck_assert_int_eq(S2(SYS_munmap, a, 4096), 0);
	ck_assert_int_eq(h[0], 0);
	/* Its memfd let go of with its last mapping; the next one takes the slot. */
	ck_assert_int_eq(pp->mfiles[id], -1);
	n = pp->n_mfiles;
	a = S6(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_int_gt(a, 0);
	ck_assert_int_eq(vma_find(&pp->mm.map, (uint64_t)a)->file_id, id);
	ck_assert_int_eq(pp->n_mfiles, n);
	ck_assert_int_eq(S2(SYS_munmap, a, 4096), 0);
}
END_TEST

/* A file written, read back, mapped; the directory listed; renames, links, modes. */
START_TEST(test_file_calls)
{
	int64_t fd, fd2, m;
	char *buf = gp(scratch + 0x8000, 4096);
	struct stat st;

	fd = S4(SYS_openat, AT_FDCWD, gpath(0, "a"), O_CREAT | O_RDWR | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 3);
	strcpy(buf, "hello, file");
	ck_assert_int_eq(S3(SYS_write, fd, scratch + 0x8000, 11), 11);
	ck_assert_int_eq(S3(SYS_lseek, fd, 0, SEEK_SET), 0);
	memset(buf, 0, 32);
	ck_assert_int_eq(S3(SYS_read, fd, scratch + 0x8000, 32), 11);
	ck_assert_str_eq(buf, "hello, file");
	ck_assert_int_eq(S4(SYS_pread64, fd, scratch + 0x8100, 4, 7), 4);
	ck_assert_int_eq(memcmp(buf + 0x100, "file", 4), 0);
	ck_assert_int_eq(S2(SYS_fstat, fd, scratch + 0x9000), 0);
	memcpy(&st, gp(scratch + 0x9000, sizeof(st)), sizeof(st));
	ck_assert_int_eq(st.st_size, 11);
	ck_assert_int_eq(st.st_mode & 0777, 0644 & ~pp->fs.umask);

	/* A private file mapping shows the file's bytes. */
	m = S6(SYS_mmap, 0, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	ck_assert_int_gt(m, 0);
	ck_assert_int_eq(memcmp(gp((uint64_t)m, 11), "hello, file", 11), 0);

	fd2 = S1(SYS_dup, fd);
	ck_assert_int_gt(fd2, fd);
	ck_assert_int_eq(S2(SYS_dup2, fd, 40), 40);
	ck_assert_int_eq(S3(SYS_dup3, fd, 41, O_CLOEXEC), 41);
	ck_assert_int_eq(S2(SYS_fcntl, 41, F_GETFD), FD_CLOEXEC);
	ck_assert_int_eq(S2(SYS_fcntl, fd, F_GETFL) & O_ACCMODE, O_RDWR);
	ck_assert_int_eq(S3(SYS_fcntl, fd, F_DUPFD, 50), 50);
	ck_assert_int_eq(S2(SYS_ftruncate, fd, 5), 0);
	ck_assert_int_eq(S1(SYS_fsync, fd), 0);
	ck_assert_int_eq(S1(SYS_close, fd2), 0);
	ck_assert_int_eq(S1(SYS_close, fd2), -EBADF);
	ck_assert_int_eq(S1(SYS_close, 40), 0);

	ck_assert_int_eq(S2(SYS_mkdir, gpath(0, "d"), 0755), 0);
	ck_assert_int_eq(S2(SYS_mkdir, gpath(0, "d"), 0755), -EEXIST);
	ck_assert_int_eq(S2(SYS_rename, gpath(0, "a"), gpath(0x400, "d/b")), 0);
	ck_assert_int_eq(S2(SYS_access, gpath(0, "d/b"), R_OK), 0);
	ck_assert_int_eq(S2(SYS_access, gpath(0, "a"), F_OK), -ENOENT);
	ck_assert_int_eq(S2(SYS_symlink, gstr(0x800, "b"), gpath(0, "d/l")), 0);
	ck_assert_int_eq(S3(SYS_readlink, gpath(0, "d/l"), scratch + 0x8000, 64), 1);
	ck_assert_int_eq(buf[0], 'b');
	ck_assert_int_eq(S2(SYS_link, gpath(0, "d/b"), gpath(0x400, "d/h")), 0);
	ck_assert_int_eq(S2(SYS_chmod, gpath(0, "d/h"), 0600), 0);
	ck_assert_int_eq(S2(SYS_stat, gpath(0, "d/b"), scratch + 0x9000), 0);
	memcpy(&st, gp(scratch + 0x9000, sizeof(st)), sizeof(st));
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(st.st_nlink, 2);

	/* The listing has the three names. */
	fd2 = S2(SYS_open, gpath(0, "d"), O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd2, 0);
	m = S3(SYS_getdents64, fd2, scratch + 0x8000, 4096);
	ck_assert_int_gt(m, 0);
	for (const char *want[] = { "b", "h", "l" }, **w = want; w < want + 3; w++) {
		bool found = false;

		for (int64_t off = 0; off < m;) {
			struct { uint64_t ino; int64_t off; uint16_t reclen; uint8_t type; char name[]; }
				*d = (void *)(buf + off);

			found = found || strcmp(d->name, *w) == 0;
			off += d->reclen;
		}
		ck_assert_msg(found, "%s not listed", *w);
	}
	ck_assert_int_eq(S1(SYS_close, fd2), 0);

	ck_assert_int_eq(S1(SYS_chdir, gpath(0, "d")), 0);
	ck_assert_int_gt(S2(SYS_getcwd, scratch + 0x8000, 4096), 0);
	ck_assert_ptr_nonnull(strstr(buf, "/d"));
	ck_assert_int_eq(S1(SYS_unlink, gstr(0, "h")), 0);
	ck_assert_int_eq(S1(SYS_unlink, gstr(0, "l")), 0);
	ck_assert_int_eq(S1(SYS_unlink, gstr(0, "b")), 0);
	ck_assert_int_eq(S1(SYS_chdir, gstr(0, "..")), 0);
	ck_assert_int_eq(S1(SYS_rmdir, gpath(0, "d")), 0);
	ck_assert_int_eq(S1(SYS_umask, 077), 022);
	ck_assert_int_eq(S1(SYS_umask, 022), 077);

	/* Outside the --rw directories nothing is written. */
	ck_assert_int_lt(S3(SYS_open, gstr(0, "/etc/ccvm-must-not-exist"), O_CREAT | O_WRONLY, 0600), 0);
	ck_assert_int_lt(S3(SYS_open, gstr(0, "/etc/hostname"), O_WRONLY, 0), 0);
	ck_assert_int_ge(S3(SYS_open, gstr(0, "/etc/hostname"), O_RDONLY, 0), 0);
	ck_assert_int_eq(S3(SYS_open, gstr(0, "/no/such/file"), O_RDONLY, 0), -ENOENT);
}
END_TEST

/* A pipe and an eventfd under epoll, and poll over them. */
START_TEST(test_pipes_and_epoll)
{
	int *fds = gp(scratch, 8);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 42 }, *out;
	int64_t ep, efd;
	struct pollfd *pf;

	ck_assert_int_eq(S2(SYS_pipe2, scratch, O_CLOEXEC), 0);
	ep = S1(SYS_epoll_create1, 0);
	ck_assert_int_ge(ep, 0);
	memcpy(gp(scratch + 0x100, sizeof(ev)), &ev, sizeof(ev));
	ck_assert_int_eq(S4(SYS_epoll_ctl, ep, EPOLL_CTL_ADD, fds[0], scratch + 0x100), 0);
	ck_assert_int_eq(S4(SYS_epoll_wait, ep, scratch + 0x200, 4, 0), 0);
	ck_assert_int_eq(S3(SYS_write, fds[1], gstr(0x300, "x"), 1), 1);
	ck_assert_int_eq(S4(SYS_epoll_wait, ep, scratch + 0x200, 4, 100), 1);
	out = gp(scratch + 0x200, sizeof(*out));
	ck_assert_uint_eq(out->data.u64, 42);

	efd = S2(SYS_eventfd2, 3, 0);
	ck_assert_int_ge(efd, 0);
	pf = gp(scratch + 0x400, 2 * sizeof(*pf));
	pf[0] = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = (int)efd, .events = POLLIN };
	ck_assert_int_eq(S3(SYS_poll, scratch + 0x400, 2, 0), 2);
	ck_assert_int_eq(S3(SYS_read, efd, scratch + 0x500, 8), 8);
	ck_assert_uint_eq(*(uint64_t *)gp(scratch + 0x500, 8), 3);
	ck_assert_int_eq(S3(SYS_poll, scratch + 0x400, 2, 10), 1);
	ck_assert_int_eq(S1(SYS_close, ep), 0);
}
END_TEST

/* Identity, limits, signal dispositions, the clock: what the monitor answers itself. */
START_TEST(test_misc_calls)
{
	struct utsname *u = gp(scratch, sizeof(struct utsname));
	struct lx_sigaction sa = { .handler = 0x1234, .flags = 0x04000000, .mask = 0x5 };
	struct rlimit *rl = gp(scratch + 0x800, sizeof(*rl));
	struct timespec *ts = gp(scratch + 0x900, 2 * sizeof(*ts));
	int64_t t0;

	ck_assert_int_eq(S1(SYS_uname, scratch), 0);
	ck_assert_str_eq(u->sysname, "Linux");
	ck_assert_int_eq(S3(SYS_getrandom, scratch + 0x1000, 64, 0), 64);
	ck_assert_int_eq(S0(SYS_getuid), (int64_t)getuid());
	ck_assert_int_gt(S0(SYS_getppid), 0);
	ck_assert_int_eq(S4(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, scratch + 0x800), 0);
	ck_assert_uint_gt(rl->rlim_cur, 0);
	rl->rlim_cur = 100;
	ck_assert_int_eq(S4(SYS_prlimit64, 0, RLIMIT_NOFILE, scratch + 0x800, 0), 0);
	ck_assert_int_eq(S2(SYS_getrlimit, RLIMIT_NOFILE, scratch + 0x800), 0);
	ck_assert_uint_eq(rl->rlim_cur, 100);

	memcpy(gp(scratch + 0xa00, sizeof(sa)), &sa, sizeof(sa));
	ck_assert_int_eq(S4(SYS_rt_sigaction, SIGUSR1, scratch + 0xa00, 0, 8), 0);
	ck_assert_int_eq(S4(SYS_rt_sigaction, SIGUSR1, 0, scratch + 0xb00, 8), 0);
	ck_assert_uint_eq(((struct lx_sigaction *)gp(scratch + 0xb00, sizeof(sa)))->handler, 0x1234);
	ck_assert_int_eq(S4(SYS_rt_sigaction, SIGKILL, scratch + 0xa00, 0, 8), -EINVAL);
	*(uint64_t *)gp(scratch + 0xc00, 8) = 1ULL << (SIGUSR2 - 1);
	ck_assert_int_eq(S4(SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xc00, scratch + 0xc08, 8), 0);
	ck_assert_uint_eq(pt.sigmask, 1ULL << (SIGUSR2 - 1));

	ck_assert_int_eq(S2(SYS_clock_gettime, CLOCK_MONOTONIC, scratch + 0x900), 0);
	t0 = ts[0].tv_sec * 1000000000LL + ts[0].tv_nsec;
	ts[1] = (struct timespec){ .tv_nsec = 2000000 };
	ck_assert_int_eq(S2(SYS_nanosleep, scratch + 0x900 + sizeof(*ts), 0), 0);
	ck_assert_int_eq(S2(SYS_clock_gettime, CLOCK_MONOTONIC, scratch + 0x900), 0);
	ck_assert_int_gt(ts[0].tv_sec * 1000000000LL + ts[0].tv_nsec, t0);
	ck_assert_int_eq(S2(SYS_clock_gettime, 1234, scratch + 0x900), -EINVAL);
	ck_assert_int_gt(S1(SYS_time, 0), 1700000000);

	ck_assert_int_eq(S2(SYS_prctl, PR_SET_NAME, gstr(0xd00, "renamed")), 0);
	ck_assert_str_eq(pp->comm, "renamed");
	ck_assert_int_eq(S1(SYS_set_tid_address, scratch + 0xe00), getpid());
	ck_assert_int_gt(S3(SYS_sched_getaffinity, 0, 128, scratch + 0xf00), 0);
	ck_assert_int_eq(S1(SYS_sysinfo, scratch + 0x1000), 0);
	ck_assert_int_eq(S0(SYS_sched_yield), 0);
	ck_assert_int_eq(S0(SYS_fork), -ENOSYS);

	/* The ids it has may be set again; no other. */
	ck_assert_int_eq(S1(SYS_setuid, getuid()), 0);
	ck_assert_int_eq(S1(SYS_setuid, getuid() + 1), -EPERM);
	ck_assert_int_eq(S1(SYS_setgid, getgid()), 0);
	ck_assert_int_eq(S3(SYS_setresuid, -1, geteuid(), -1), 0);
	/* "Unchanged" is -1 in the 32-bit uid_t, whatever the register's upper half. */
	ck_assert_int_eq(S3(SYS_setresuid, 0xffffffffULL, geteuid(), 0xffffffffULL), 0);
	ck_assert_int_eq(S3(SYS_setresgid, getgid() + 1, -1, -1), -EPERM);
	{
		gid_t g[256];
		int n = getgroups(256, g), only_own = n >= 0;

		for (int i = 0; i < n; i++)
			only_own &= g[i] == getgid();
		ck_assert_int_eq(S2(SYS_setgroups, 0, 0), only_own ? 0 : -EPERM);
		*(gid_t *)gp(scratch + 0x1400, sizeof(gid_t)) = getgid() + 1;
		ck_assert_int_eq(S2(SYS_setgroups, 1, scratch + 0x1400), -EPERM);
		*(gid_t *)gp(scratch + 0x1400, sizeof(gid_t)) = getgid(); /* initgroups for itself */
		ck_assert_int_eq(S2(SYS_setgroups, 1, scratch + 0x1400), 0);
	}
}
END_TEST

struct waiter {
	struct lx_thread t;
	uint64_t word;
	int64_t rc;
};

static void *futex_waiter(void *arg)
{
	struct waiter *w = arg;

	w->rc = psys_on(&w->t, SYS_futex, w->word, FUTEX_WAIT_PRIVATE, 7, 0, 0, 0, NULL);
	return NULL;
}

/* FUTEX_WAIT returns at once for a stale value, times out, and is woken. */
START_TEST(test_futex_calls)
{
	uint32_t *word = gp(scratch, 4);
	struct timespec *ts = gp(scratch + 0x100, sizeof(*ts));
	struct waiter w = { .word = scratch, .rc = 1 };
	pthread_t th;
	int64_t woke = 0;

	*word = 7;
	ck_assert_int_eq(S4(SYS_futex, scratch, FUTEX_WAIT_PRIVATE, 8, 0), -EAGAIN);
	*ts = (struct timespec){ .tv_nsec = 5000000 };
	ck_assert_int_eq(S4(SYS_futex, scratch, FUTEX_WAIT_PRIVATE, 7, scratch + 0x100), -ETIMEDOUT);
	ck_assert_int_eq(S3(SYS_futex, scratch, FUTEX_WAKE_PRIVATE, 1), 0);
	lx_thread_init(pp, &w.t, NULL);
	ck_assert_int_eq(pthread_create(&th, NULL, futex_waiter, &w), 0);
	for (int i = 0; i < 2000 && woke == 0; i++) {
		struct timespec nap = { .tv_nsec = 1000000 };

		nanosleep(&nap, NULL);
		woke = S3(SYS_futex, scratch, FUTEX_WAKE_PRIVATE, 1);
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(woke, 1);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_int_eq(S3(SYS_futex, scratch + 1, FUTEX_WAKE_PRIVATE, 1), -EINVAL);
}
END_TEST

/* clone of a thread hands the VM a new thread's registers and TLS; exit ends it. */
/* close_range marks a range close-on-exec, or closes it; bad ranges and flags are
 * EINVAL, as on Linux. */
/* The descriptor table under its own lock: one thread installs and closes descriptors
 * high enough to make the table grow (a realloc), while another resolves a descriptor
 * of its own, without the process's lock, as a read or write does. The other one's
 * answer never changes, and nothing reads a freed table (ASan in make test). */
struct fdt_racer {
	int host, go, stop;
};

static void *fdt_churn(void *arg)
{
	struct fdt_racer *r = arg;

	while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE)) /* the reader is at work first */
		;
	for (int i = 0; i < 2000; i++) {
		int nh = fcntl(r->host, F_DUPFD_CLOEXEC, 3);
		int fd = lx_fd_install(pp, nh, 64 + (i * 37) % 900, false);

		if (fd < 0) {
			close(nh);
			continue;
		}
		lx_fd_close(pp, fd);
	}
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

START_TEST(test_fd_table_own_lock)
{
	int64_t a = S4(SYS_openat, AT_FDCWD, gpath(0, "fdt"), O_RDWR | O_CREAT, 0600);
	struct fdt_racer r = { .host = lx_fd_host(pp, (int)a) };
	pthread_t th;
	long checks = 0;

	ck_assert_int_ge(r.host, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, fdt_churn, &r), 0);
	while (checks < 20000 || !__atomic_load_n(&r.stop, __ATOMIC_ACQUIRE)) {
		if (checks == 100)
			__atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
		ck_assert_int_eq(lx_fd_host(pp, (int)a), r.host);
		ck_assert_int_eq(lx_fd_cloexec(pp, (int)a, -1), 0);
		checks++;
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(S1(SYS_close, a), 0);
}
END_TEST

START_TEST(test_close_range)
{
	int64_t a = S4(SYS_openat, AT_FDCWD, gpath(0, "cr"), O_RDWR | O_CREAT, 0600);
	int64_t b = S1(SYS_dup, a), d = S1(SYS_dup, a);

	ck_assert_int_eq(b, a + 1);
	ck_assert_int_eq(d, a + 2);
	ck_assert_int_eq(S3(SYS_close_range, b, d, 4 /* CLOSE_RANGE_CLOEXEC */), 0);
	ck_assert_int_eq(S2(SYS_fcntl, a, F_GETFD), 0);
	ck_assert_int_eq(S2(SYS_fcntl, d, F_GETFD), FD_CLOEXEC);
	ck_assert_int_eq(S3(SYS_close_range, b, 0xffffffffULL, 0), 0);
	ck_assert_int_eq(S2(SYS_fcntl, b, F_GETFD), -EBADF);
	ck_assert_int_eq(S2(SYS_fcntl, d, F_GETFD), -EBADF);
	ck_assert_int_ge(S2(SYS_fcntl, a, F_GETFD), 0);
	ck_assert_int_eq(S3(SYS_close_range, d, b, 0), -EINVAL);
	ck_assert_int_eq(S3(SYS_close_range, a, a, 0x80), -EINVAL);
}
END_TEST

START_TEST(test_clone_and_exit)
{
	enum lx_action act;
	uint64_t flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			 CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
	int64_t tid = S6(SYS_clone, flags, scratch + 0x10000, scratch, scratch + 8, 0x7000, 0);

	ck_assert_int_gt(tid, getpid());
	ck_assert_int_eq(clones, 1);
	ck_assert_uint_eq(last_clone.regs.rax, 0);
	ck_assert_uint_eq(last_clone.regs.rsp, scratch + 0x10000);
	ck_assert_uint_eq(last_clone.fs_base, 0x7000);
	ck_assert_int_eq(*(int *)gp(scratch, 4), tid);
	ck_assert_int_eq(S6(SYS_clone, SIGCHLD, 0, 0, 0, 0, 0), -ENOSYS);
	ck_assert_int_eq(psys_on(&pt, SYS_exit_group, 3, 0, 0, 0, 0, 0, &act), 0);
	ck_assert_int_eq(act, LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 3);
}
END_TEST

/* Saved, checked and restored into a second memory: the open file at its offset, the
 * mapping, the break and the signal dispositions come back. */
START_TEST(test_state_round_trip)
{
	struct lx_thread *threads[] = { &pt };
	const char *rw[] = { pdir };
	struct lx_sigaction sa = { .handler = 0x4321 };
	struct lx_thread t2;
	struct lx_proc *p2;
	struct gmem mem2;
	char err[256] = "";
	json_t *state;
	int64_t fd, brk;
	struct lx_call c = { 0 };

	fd = S4(SYS_openat, AT_FDCWD, gpath(0, "kept"), O_CREAT | O_RDWR, 0600);
	ck_assert_int_eq(S3(SYS_write, fd, gstr(0x100, "0123456789"), 10), 10);
	ck_assert_int_eq(S3(SYS_lseek, fd, 4, SEEK_SET), 4);
	brk = S1(SYS_brk, pp->mm.brk + 8192);
	memcpy(gp(scratch + 0x200, sizeof(sa)), &sa, sizeof(sa));
	ck_assert_int_eq(S4(SYS_rt_sigaction, SIGUSR2, scratch + 0x200, 0, 8), 0);

	state = lx_state_save(pp, threads, 1);
	ck_assert_ptr_nonnull(state);
	ck_assert_msg(lx_state_check(state, P_RAM, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(lx_state_threads(state), 1);

	ck_assert_int_eq(gmem_map(&mem2, P_RAM), 0);
	memcpy(mem2.host, pmem.host, P_RAM);
	ck_assert_msg(lx_proc_restore(&mem2, state, &(struct lx_restore_policy){
						  .root = "/", .rw = rw, .n_rw = 1 },
				      &p2, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(lx_thread_restore(p2, state, 0, &t2), 0);
	ck_assert_uint_eq(p2->mm.brk, (uint64_t)brk);
	ck_assert_uint_eq(p2->sigact[SIGUSR2].handler, 0x4321);
	ck_assert_int_eq(p2->pid, pp->pid);
	ck_assert_str_eq(p2->exe, pp->exe);
	/* The file is open again at offset 4. */
	c.p = p2;
	c.t = &t2;
	{
		char got[8] = "";
		int host = lx_host_fd(&c, (uint64_t)fd);

		ck_assert_int_ge(host, 0);
		ck_assert_int_eq(read(host, got, 3), 3);
		ck_assert_int_eq(memcmp(got, "456", 3), 0);
		lx_call_release(&c);
	}
	/* A state for more RAM than there is is refused. */
	ck_assert_int_eq(lx_state_check(state, P_RAM / 4, err, sizeof(err)), -EINVAL);
	json_decref(state);
	lx_proc_destroy(p2);
	gmem_unmap(&mem2);
}
END_TEST

/* ---- signals ---- */

#define SIG_FPU_AVX   832         /* legacy area, XSAVE header, the upper halves of YMM */
#define SIG_XFEATURES 7ULL        /* x87, SSE, AVX */
#define SIG_STACK     0x80000     /* scratch offset of the thread's stack top */
#define SIG_HANDLER   0x401000ULL
#define SIG_RESTORER  0x402000ULL
#define SIG_CODE      0x400100ULL /* where the thread makes its calls */
#define SIG_MXCSR_OFF 24
#define SIG_HDR_OFF   512
#define SIG_SA_RESTORER  0x04000000ULL
#define SIG_SA_ONSTACK   0x08000000ULL
#define SIG_SA_NODEFER   0x40000000ULL
#define SIG_SA_RESETHAND 0x80000000ULL
#define SIG_BIT(s) (1ULL << ((s) - 1))
#define SIG_SS_AUTODISARM (1U << 31) /* <linux/signal.h> clashes with glibc's */

/* The vCPU's FPU and vector registers, as the VM's hooks would give them. */
static uint8_t sig_fpu[4096] __attribute__((aligned(64)));
static int sig_fpu_len, sig_fpu_loads;
static bool sig_fpu_refuse;

static int hook_fpu_save(void *vcpu, void *buf, size_t cap, uint64_t *xfeatures)
{
	(void)vcpu;
	if ((size_t)sig_fpu_len > cap)
		return -ENOSPC;
	memcpy(buf, sig_fpu, (size_t)sig_fpu_len);
	*xfeatures = SIG_XFEATURES;
	return sig_fpu_len;
}

static int hook_fpu_load(void *vcpu, const void *buf, size_t len)
{
	(void)vcpu;
	if (sig_fpu_refuse || len != (size_t)sig_fpu_len)
		return -EINVAL;
	memcpy(sig_fpu, buf, len);
	sig_fpu_loads++;
	return 0;
}

static int sig_kicks_lost; /* kicks to lose, as if they landed before the host call */

/* A vCPU's host thread, kicked out of its host call as the VM would kick it. */
static void hook_kick(void *vcpu)
{
	if (sig_kicks_lost > 0) {
		sig_kicks_lost--;
		return;
	}
	if (vcpu)
		pthread_kill(*(pthread_t *)vcpu, SIGURG);
}

static void sig_kicked(int sig)
{
	(void)sig; /* only there to end a host call with EINTR */
}

static const struct lx_hooks sig_hooks = { .before_discard = hook_discard,
					   .thread_create = hook_thread,
					   .fpu_save = hook_fpu_save,
					   .fpu_load = hook_fpu_load,
					   .signal_kick = hook_kick };
static pthread_t sig_main;

static uint32_t sig_mxcsr(void)
{
	uint32_t m;

	memcpy(&m, sig_fpu + SIG_MXCSR_OFF, sizeof(m));
	return m;
}

static void sig_setup(void)
{
	struct sigaction kick = { .sa_handler = sig_kicked }; /* no SA_RESTART */

	sigaction(SIGURG, &kick, NULL);
	p_setup();
	pp->hooks = &sig_hooks;
	sig_main = pthread_self();
	pt.vcpu = &sig_main;
	sig_fpu_len = SIG_FPU_AVX;
	sig_fpu_loads = 0;
	sig_fpu_refuse = false;
	sig_kicks_lost = 0;
	for (int i = 0; i < SIG_FPU_AVX; i++)
		sig_fpu[i] = (uint8_t)(i * 7 + 1);
	memcpy(sig_fpu + SIG_MXCSR_OFF, &(uint32_t){ 0x1f80 }, 4);
	memcpy(sig_fpu + SIG_HDR_OFF, &(uint64_t){ SIG_XFEATURES }, 8);
	memset(sig_fpu + SIG_HDR_OFF + 8, 0, 56);
}

/* A thread's user registers between calls: where vcpu.c keeps them. */
static struct cpu_regs sig_user(void)
{
	return (struct cpu_regs){ .rip = SIG_CODE, .rsp = scratch + SIG_STACK,
				  .rflags = RFLAGS_FIXED | RFLAGS_IF, .rbx = 0x1111,
				  .r12 = 0x2222, .r15 = 0x5555 };
}

/* Thread @t at @u makes system call @nr: the registers as `syscall` leaves them (RCX
 * the return address, R11 the flags), then @u where the thread resumes, as vcpu.c
 * resumes it (as SYSRET, or exactly when the personality says so). */
static enum lx_action sig_call5(struct lx_thread *t, struct cpu_regs *u, uint64_t nr, uint64_t a0,
				uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4)
{
	struct cpu_regs r = *u;
	struct cpu_segs sregs = { 0 };
	bool dirty = false;
	enum lx_action act;

	r.rax = nr, r.rdi = a0, r.rsi = a1, r.rdx = a2, r.r10 = a3, r.r8 = a4;
	r.rcx = u->rip + 2;
	r.r11 = u->rflags;
	act = lx_syscall(t, &r, &sregs, &dirty);
	if (!t->resume_exact) {
		r.rip = r.rcx;
		x86_sysret_regs(&r);
	}
	*u = r;
	return act;
}

static enum lx_action sig_call(struct lx_thread *t, struct cpu_regs *u, uint64_t nr, uint64_t a0,
			       uint64_t a1, uint64_t a2, uint64_t a3)
{
	return sig_call5(t, u, nr, a0, a1, a2, a3, 0);
}

static void sig_handle(int sig, uint64_t handler, uint64_t flags, uint64_t mask)
{
	struct lx_sigaction sa = { .handler = handler, .flags = flags | SIG_SA_RESTORER,
				   .restorer = SIG_RESTORER, .mask = mask };

	memcpy(gp(scratch + 0xa00, sizeof(sa)), &sa, sizeof(sa));
	ck_assert_int_eq(S4(SYS_rt_sigaction, sig, scratch + 0xa00, 0, 8), 0);
}

/* The handler returns: its `ret` pops the restorer, which calls rt_sigreturn. */
static enum lx_action sig_return(struct lx_thread *t, struct cpu_regs *u)
{
	ck_assert_uint_eq(*(uint64_t *)gp(u->rsp, 8), SIG_RESTORER);
	u->rsp += 8;
	u->rip = SIG_RESTORER;
	return sig_call(t, u, SYS_rt_sigreturn, 0, 0, 0, 0);
}

/* A handler runs on a frame that glibc's own ucontext_t and siginfo_t read as Linux
 * lays it out: registers, mask, XSAVE area with the kernel's marks, the restorer to
 * return through; the handler starts with DF clear, its mask applied and the FPU reset.
 * rt_sigreturn takes back what the handler changed, except what a program may not set
 * (IOPL, VM) and MXCSR's reserved bits. */
START_TEST(test_signal_frame)
{
	struct cpu_regs u = sig_user(), before;
	uint8_t fpu0[SIG_FPU_AVX];
	ucontext_t *uc;
	siginfo_t *si;
	uint32_t m;

	memcpy(fpu0, sig_fpu, sizeof(fpu0));
	sig_handle(SIGUSR1, SIG_HANDLER, SA_SIGINFO, SIG_BIT(SIGUSR2));
	u.rflags |= RFLAGS_DF;
	before = u;
	ck_assert_int_eq(sig_call(&pt, &u, SYS_tgkill, pp->pid, pt.tid, SIGUSR1, 0), LX_RESUME);
	ck_assert_uint_eq(u.rip, SIG_HANDLER);
	ck_assert_uint_eq(u.rdi, SIGUSR1);
	ck_assert_uint_eq(u.rflags & RFLAGS_DF, 0);
	ck_assert_uint_eq((u.rsp + 8) % 16, 0);
	ck_assert_uint_le(u.rsp + 440, before.rsp - 128);
	ck_assert_uint_eq(pt.sigmask, SIG_BIT(SIGUSR1) | SIG_BIT(SIGUSR2));

	uc = gp(u.rdx, offsetof(ucontext_t, uc_sigmask) + 8);
	si = gp(u.rsi, sizeof(*si));
	ck_assert_int_eq(si->si_signo, SIGUSR1);
	ck_assert_int_eq(si->si_code, SI_TKILL);
	ck_assert_int_eq(si->si_pid, pp->pid);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RIP], SIG_CODE + 2);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RAX], 0);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RBX], 0x1111);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RSP], before.rsp);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_EFL], before.rflags);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_CSGSFS] & 0xffff, 0x33); /* Linux's __USER_CS */
	ck_assert_uint_eq(uc->uc_sigmask.__val[0], 0);
	ck_assert_int_eq(uc->uc_stack.ss_flags, SS_DISABLE);
	ck_assert_uint_eq((uintptr_t)uc->uc_mcontext.fpregs % 64, 0);
	{
		uint8_t *fp = gp((uint64_t)(uintptr_t)uc->uc_mcontext.fpregs, SIG_FPU_AVX + 4);
		struct _fpx_sw_bytes *sw = (struct _fpx_sw_bytes *)(fp + 464);

		ck_assert_int_eq(memcmp(fp, fpu0, 464), 0);
		ck_assert_int_eq(memcmp(fp + 512, fpu0 + 512, SIG_FPU_AVX - 512), 0);
		ck_assert_uint_eq(sw->magic1, FP_XSTATE_MAGIC1);
		ck_assert_uint_eq(sw->xstate_size, SIG_FPU_AVX);
		ck_assert_uint_eq(sw->extended_size, SIG_FPU_AVX + 4);
		ck_assert_uint_eq(*(uint32_t *)(fp + SIG_FPU_AVX), FP_XSTATE_MAGIC2);
		/* The handler changes the interrupted state, some of it beyond its reach. */
		memcpy(fp + SIG_MXCSR_OFF, &(uint32_t){ 0x1fa0 | 0x10000 }, 4);
	}
	ck_assert_uint_eq(sig_mxcsr(), 0x1f80); /* the handler starts afresh */
	ck_assert_uint_eq(*(uint64_t *)(sig_fpu + SIG_HDR_OFF), 0);
	uc->uc_mcontext.gregs[REG_R12] = 42;
	uc->uc_mcontext.gregs[REG_EFL] |= RFLAGS_IOPL | RFLAGS_VM | RFLAGS_AC;
	uc->uc_mcontext.gregs[REG_CSGSFS] = 0x8;

	ck_assert_int_eq(sig_return(&pt, &u), LX_RESUME);
	ck_assert_uint_eq(u.rip, SIG_CODE + 2);
	ck_assert_uint_eq(u.rsp, before.rsp);
	ck_assert_uint_eq(u.rax, 0);
	ck_assert_uint_eq(u.rbx, 0x1111);
	ck_assert_uint_eq(u.r12, 42);
	ck_assert_uint_eq(u.r15, 0x5555);
	ck_assert_uint_eq(u.rflags & (RFLAGS_IOPL | RFLAGS_VM), 0);
	ck_assert_uint_eq(u.rflags & (RFLAGS_AC | RFLAGS_DF | RFLAGS_IF),
			  RFLAGS_AC | RFLAGS_DF | RFLAGS_IF);
	ck_assert_uint_eq(pt.sigmask, 0);
	m = sig_mxcsr();
	ck_assert_uint_eq(m, 0x1fa0);
	ck_assert_int_eq(memcmp(sig_fpu + 512 + 64, fpu0 + 512 + 64, SIG_FPU_AVX - 576), 0);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_getpid, 0, 0, 0, 0), LX_RESUME);
	ck_assert_uint_eq(u.rip, SIG_CODE + 4); /* nothing more pending */
}
END_TEST

/* Blocked signals wait; unblocking delivers them lowest first, a standard signal sent
 * twice once, each real-time one as queued (with its value) in order, nested as the
 * handlers' masks allow. */
START_TEST(test_signal_queues)
{
	const int rt = 34;
	struct cpu_regs u = sig_user();
	uint64_t all = SIG_BIT(SIGUSR2) | SIG_BIT(rt), handler_usr2 = SIG_HANDLER + 0x100;
	siginfo_t *q = gp(scratch + 0xc00, sizeof(*q));

	sig_handle(SIGUSR2, handler_usr2, SA_SIGINFO, 0);
	sig_handle(rt, SIG_HANDLER, SA_SIGINFO, 0);
	*(uint64_t *)gp(scratch + 0xb00, 8) = all;
	ck_assert_int_eq(sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xb00, 0, 8),
			 LX_RESUME);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR2, 0, 0), LX_RESUME);
	for (int v = 1; v <= 3; v++) {
		memset(q, 0, sizeof(*q));
		q->si_code = SI_QUEUE;
		q->si_value.sival_int = v;
		ck_assert_int_eq(sig_call(&pt, &u, SYS_rt_sigqueueinfo, pp->pid, rt,
					  scratch + 0xc00, 0), LX_RESUME);
		ck_assert_uint_eq(u.rax, 0);
	}
	ck_assert_uint_eq(u.rip, SIG_CODE + 12); /* six calls, all blocked: nothing ran */

	*(uint64_t *)gp(scratch + 0xb00, 8) = 0;
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_SETMASK, scratch + 0xb00, 0, 8);
	for (int v = 1; v <= 3; v++) {
		siginfo_t *si = gp(u.rsi, sizeof(*si));

		ck_assert_uint_eq(u.rip, SIG_HANDLER);
		ck_assert_int_eq(si->si_signo, rt);
		ck_assert_int_eq(si->si_code, SI_QUEUE);
		ck_assert_int_eq(si->si_value.sival_int, v);
		ck_assert_uint_eq(pt.sigmask, SIG_BIT(SIGUSR2) | SIG_BIT(rt));
		sig_return(&pt, &u);
	}
	ck_assert_uint_eq(u.rip, handler_usr2); /* back in the first handler, once */
	ck_assert_uint_eq(u.rdi, SIGUSR2);
	sig_return(&pt, &u);
	ck_assert_uint_eq(u.rip, SIG_CODE + 14); /* after the call that unblocked them */
	ck_assert_uint_eq(pt.sigmask, 0);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_getpid, 0, 0, 0, 0), LX_RESUME);
	ck_assert_uint_eq(u.rip, SIG_CODE + 16);
}
END_TEST

/* Ignored and harmless signals do nothing; one fatal by default ends the VM with
 * 128 + the signal; SA_RESETHAND and SA_NODEFER act as in Linux. */
START_TEST(test_signal_dispositions)
{
	struct cpu_regs u = sig_user();

	sig_handle(SIGUSR1, (uint64_t)(uintptr_t)SIG_IGN, 0, 0);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR1, 0, 0), LX_RESUME);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, SIGCHLD, 0, 0), LX_RESUME);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, 0, 0, 0), LX_RESUME);
	ck_assert_uint_eq(u.rip, SIG_CODE + 6);

	sig_handle(SIGUSR2, SIG_HANDLER, SIG_SA_RESETHAND | SIG_SA_NODEFER, 0);
	sig_call(&pt, &u, SYS_tkill, pt.tid, SIGUSR2, 0, 0);
	ck_assert_uint_eq(u.rip, SIG_HANDLER);
	ck_assert_uint_eq(pt.sigmask, 0); /* SA_NODEFER */
	ck_assert_uint_eq(pp->sigact[SIGUSR2].handler, (uint64_t)(uintptr_t)SIG_DFL);
	sig_return(&pt, &u);
	ck_assert_uint_eq(u.rip, SIG_CODE + 8);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_tgkill, pp->pid, pt.tid + 999, SIGUSR2, 0),
			 LX_RESUME);
	ck_assert_int_eq((int64_t)u.rax, -ESRCH);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, 65, 0, 0), LX_RESUME);
	ck_assert_int_eq((int64_t)u.rax, -EINVAL);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, SIGTERM, 0, 0), LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 128 + SIGTERM);
}
END_TEST

/* SA_ONSTACK puts the frame on the alternate stack, SS_AUTODISARM disarms it while
 * the handler runs and rt_sigreturn arms it again; a frame that does not fit there,
 * a handler without a restorer, a frame that no longer reads, or an FPU area the CPU
 * refuses each end in SIGSEGV (status 139 with no handler for it). */
START_TEST(test_signal_altstack_and_faults)
{
	struct cpu_regs u = sig_user();
	uint64_t alt = scratch + 0x20000, alt_size = 0x8000;
	stack_t *ss = gp(scratch + 0xb00, sizeof(*ss)), *cur = gp(scratch + 0xb40, sizeof(*cur));
	struct lx_sigaction bare = { .handler = SIG_HANDLER };

	*ss = (stack_t){ .ss_sp = (void *)(uintptr_t)alt, .ss_size = alt_size,
			 .ss_flags = (int)SIG_SS_AUTODISARM };
	ck_assert_int_eq(S2(SYS_sigaltstack, scratch + 0xb00, 0), 0);
	sig_handle(SIGUSR1, SIG_HANDLER, SIG_SA_ONSTACK, 0);
	sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR1, 0, 0);
	ck_assert_uint_eq(u.rip, SIG_HANDLER);
	ck_assert_uint_gt(u.rsp, alt);
	ck_assert_uint_lt(u.rsp, alt + alt_size);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_sigaltstack, 0, scratch + 0xb40, 0, 0), LX_RESUME);
	ck_assert_int_eq(cur->ss_flags, SS_DISABLE); /* disarmed while the handler runs */
	sig_return(&pt, &u);
	ck_assert_uint_eq(u.rsp, scratch + SIG_STACK);
	sig_call(&pt, &u, SYS_sigaltstack, 0, scratch + 0xb40, 0, 0);
	ck_assert_uint_eq((uintptr_t)cur->ss_sp, alt);
	ck_assert_int_eq(cur->ss_flags, (int)SIG_SS_AUTODISARM);

	/* A damaged frame: rt_sigreturn with nothing mapped under the stack pointer. */
	u.rsp = 8;
	ck_assert_int_eq(sig_call(&pt, &u, SYS_rt_sigreturn, 0, 0, 0, 0), LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 128 + SIGSEGV);

	/* An FPU area bigger than the alternate stack takes: SIGSEGV, even if handled. */
	u = sig_user();
	sig_handle(SIGSEGV, SIG_HANDLER, SIG_SA_ONSTACK, 0);
	*ss = (stack_t){ .ss_sp = (void *)(uintptr_t)alt, .ss_size = 2048 };
	ck_assert_int_eq(S2(SYS_sigaltstack, scratch + 0xb00, 0), 0);
	sig_fpu_len = 2688; /* AVX-512's XSAVE area */
	ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, SIGSEGV, 0, 0), LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 128 + SIGSEGV);

	/* No restorer: x86-64 Linux has no default way back. */
	u = sig_user();
	pp->exit_status = 0;
	memcpy(gp(scratch + 0xa00, sizeof(bare)), &bare, sizeof(bare));
	ck_assert_int_eq(S4(SYS_rt_sigaction, SIGUSR2, scratch + 0xa00, 0, 8), 0);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR2, 0, 0), LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 128 + SIGSEGV);
}
END_TEST

/* The CPU refuses the FPU area a handler left: SIGSEGV, as a bad frame. */
START_TEST(test_signal_fpu_refused)
{
	struct cpu_regs u = sig_user();

	sig_handle(SIGUSR1, SIG_HANDLER, 0, 0);
	sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR1, 0, 0);
	ck_assert_uint_eq(u.rip, SIG_HANDLER);
	sig_fpu_refuse = true;
	ck_assert_int_eq(sig_return(&pt, &u), LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 128 + SIGSEGV);
}
END_TEST

/* tgkill reaches another thread only: it runs the handler when it next returns from
 * a call, the sender does not; a thread that exited is gone (ESRCH). */
START_TEST(test_signal_threads)
{
	uint64_t flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			 CLONE_SYSVSEM;
	struct cpu_regs u = sig_user(), u2 = sig_user();
	struct lx_thread t2;
	int64_t tid;

	sig_handle(SIGUSR1, SIG_HANDLER, 0, 0);
	tid = S6(SYS_clone, flags, scratch + 0x10000, 0, 0, 0, 0);
	ck_assert_int_gt(tid, 0);
	t2 = last_clone.thread;
	t2.proc = pp;
	ck_assert_int_eq(sig_call(&pt, &u, SYS_tgkill, pp->pid, tid, SIGUSR1, 0), LX_RESUME);
	ck_assert_uint_eq(u.rax, 0);
	ck_assert_uint_eq(u.rip, SIG_CODE + 2);
	ck_assert_int_eq(sig_call(&t2, &u2, SYS_getpid, 0, 0, 0, 0), LX_RESUME);
	ck_assert_uint_eq(u2.rip, SIG_HANDLER);
	ck_assert_int_eq(sig_call(&t2, &u2, SYS_exit, 0, 0, 0, 0), LX_EXIT_THREAD);
	sig_call(&pt, &u, SYS_tgkill, pp->pid, tid, SIGUSR1, 0);
	ck_assert_int_eq((int64_t)u.rax, -ESRCH);
}
END_TEST

/* A write to a pipe with no reader raises SIGPIPE and still fails with EPIPE; ignored,
 * only EPIPE; send with MSG_NOSIGNAL raises nothing; by default it ends the VM (141). */
START_TEST(test_signal_broken_pipe)
{
	struct cpu_regs u = sig_user();
	int *fds = gp(scratch + 0xb00, 2 * sizeof(int));
	siginfo_t *si;
	int sv[2];

	signal(SIGPIPE, SIG_IGN); /* as ccvm ignores it for itself (main.c) */
	ck_assert_int_eq(S2(SYS_pipe2, scratch + 0xb00, 0), 0);
	ck_assert_int_eq(S1(SYS_close, fds[0]), 0);
	sig_handle(SIGPIPE, SIG_HANDLER, SA_SIGINFO, 0);
	sig_call(&pt, &u, SYS_write, fds[1], gstr(0xc00, "x"), 1, 0);
	ck_assert_uint_eq(u.rip, SIG_HANDLER);
	si = gp(u.rsi, sizeof(*si));
	ck_assert_int_eq(si->si_signo, SIGPIPE);
	ck_assert_int_eq(si->si_code, SI_USER);
	ck_assert_int_eq((int64_t)((ucontext_t *)gp(u.rdx, 256))->uc_mcontext.gregs[REG_RAX],
			 -EPIPE);
	sig_return(&pt, &u);
	ck_assert_int_eq((int64_t)u.rax, -EPIPE);

	ck_assert_int_eq(S4(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, scratch + 0xb00), 0);
	sv[0] = fds[0], sv[1] = fds[1];
	ck_assert_int_eq(S1(SYS_close, sv[1]), 0);
	sig_call(&pt, &u, SYS_sendto, sv[0], gstr(0xc00, "x"), 1, MSG_NOSIGNAL);
	ck_assert_int_eq((int64_t)u.rax, -EPIPE);
	ck_assert_uint_ne(u.rip, SIG_HANDLER);
	sig_handle(SIGPIPE, (uint64_t)(uintptr_t)SIG_IGN, 0, 0);
	sig_call(&pt, &u, SYS_sendto, sv[0], gstr(0xc00, "x"), 1, 0);
	ck_assert_int_eq((int64_t)u.rax, -EPIPE);
	ck_assert_uint_ne(u.rip, SIG_HANDLER);
	sig_handle(SIGPIPE, (uint64_t)(uintptr_t)SIG_DFL, 0, 0);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_write, sv[0], gstr(0xc00, "x"), 1, 0),
			 LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 128 + SIGPIPE);
}
END_TEST

/* A second guest thread, as clone makes it, that system calls can run on. It stays
 * known to senders (it never calls exit), so it must outlive the test: static. */
struct sig_waiter {
	struct lx_thread t;
	pthread_t th;
	struct cpu_regs u;
	uint64_t nr, a[5];
	enum lx_action act;
};

static void *sig_waiter_run(void *arg)
{
	struct sig_waiter *w = arg;

	w->act = sig_call5(&w->t, &w->u, w->nr, w->a[0], w->a[1], w->a[2], w->a[3], w->a[4]);
	return NULL;
}

static void sig_waiter_start(struct sig_waiter *w, pthread_t *th)
{
	uint64_t flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			 CLONE_SYSVSEM;

	ck_assert_int_gt(S6(SYS_clone, flags, scratch + 0x10000, 0, 0, 0, 0), 0);
	w->t = last_clone.thread;
	w->t.proc = pp;
	w->u = sig_user();
	w->u.rsp = scratch + SIG_STACK - 0x8000; /* its own stack */
	w->t.vcpu = &w->th;
	ck_assert_int_eq(pthread_create(th, NULL, sig_waiter_run, w), 0);
	w->th = *th;
}

/* Wait until the waiter sleeps in its call (it blocks in the process' condition). */
static void sig_settle(void)
{
	struct timespec nap = { .tv_nsec = 20000000 };

	nanosleep(&nap, NULL);
}

/* Waiter @w, blocked in its call on thread @th, gets @sig from this thread: its handler
 * runs, and the frame says the call ended with EINTR. */
static void sig_expect_eintr(struct sig_waiter *w, pthread_t th, struct cpu_regs *u, int sig)
{
	ucontext_t *uc;

	sig_settle();
	sig_call(&pt, u, SYS_tgkill, pp->pid, w->t.tid, sig, 0);
	ck_assert_uint_eq(u->rax, 0);
	pthread_join(th, NULL);
	ck_assert_uint_eq(w->u.rip, SIG_HANDLER);
	uc = gp(w->u.rdx, offsetof(ucontext_t, uc_sigmask) + 8);
	ck_assert_int_eq((int64_t)uc->uc_mcontext.gregs[REG_RAX], -EINTR);
}

/* rt_sigsuspend sleeps with its own mask until a signal comes, runs the handler with
 * the mask from before the call saved in the frame, and returns EINTR; the thread
 * that blocks the signal does not take it. pause does the same with the mask it has. */
START_TEST(test_signal_suspend_and_pause)
{
	struct cpu_regs u = sig_user();
	static struct sig_waiter w; /* senders may look at it until the process is gone */
	ucontext_t *uc;
	pthread_t th;

	w = (struct sig_waiter){ .nr = SYS_rt_sigsuspend, .a = { scratch + 0xb08, 8 } };
	sig_handle(SIGUSR1, SIG_HANDLER, SA_SIGINFO, 0);
	*(uint64_t *)gp(scratch + 0xb00, 8) = SIG_BIT(SIGUSR1);
	*(uint64_t *)gp(scratch + 0xb08, 8) = 0;
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xb00, 0, 8);
	sig_waiter_start(&w, &th); /* inherits the mask: SIGUSR1 blocked */
	sig_settle();
	sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR1, 0, 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.act, LX_RESUME);
	ck_assert_uint_eq(w.u.rip, SIG_HANDLER);
	ck_assert_uint_ne(u.rip, SIG_HANDLER);
	uc = gp(w.u.rdx, offsetof(ucontext_t, uc_sigmask) + 8);
	ck_assert_int_eq((int64_t)uc->uc_mcontext.gregs[REG_RAX], -EINTR);
	ck_assert_uint_eq(uc->uc_sigmask.__val[0], SIG_BIT(SIGUSR1));
	ck_assert_uint_eq(w.t.sigmask, SIG_BIT(SIGUSR1));
	ck_assert(!w.t.restore_mask);
	sig_return(&w.t, &w.u);
	ck_assert_uint_eq(w.t.sigmask, SIG_BIT(SIGUSR1));

	/* pause: woken by a tgkill at it. */
	w.t.sigmask = 0;
	w.nr = SYS_pause;
	ck_assert_int_eq(pthread_create(&th, NULL, sig_waiter_run, &w), 0);
	sig_expect_eintr(&w, th, &u, SIGUSR1);
}
END_TEST

/* rt_sigtimedwait takes a blocked signal without its handler, with its siginfo;
 * rt_sigpending shows it before; with none it ends at its timeout with EAGAIN, and a
 * signal sent by another thread wakes it. */
START_TEST(test_signal_timedwait)
{
	struct cpu_regs u = sig_user();
	struct timespec *ts = gp(scratch + 0xb10, sizeof(*ts)), t0, t1;
	siginfo_t *si = gp(scratch + 0xc00, sizeof(*si));
	static struct sig_waiter w; /* senders may look at it until the process is gone */
	pthread_t th;

	w = (struct sig_waiter){ .nr = SYS_rt_sigtimedwait,
				 .a = { scratch + 0xb00, scratch + 0xd00, 0, 8 } };
	sig_handle(SIGUSR2, SIG_HANDLER, SA_SIGINFO, 0);
	*(uint64_t *)gp(scratch + 0xb00, 8) = SIG_BIT(SIGUSR2);
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xb00, 0, 8);
	*ts = (struct timespec){ .tv_nsec = 30000000 };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sig_call(&pt, &u, SYS_rt_sigtimedwait, scratch + 0xb00, scratch + 0xc00, scratch + 0xb10, 8);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_eq((int64_t)u.rax, -EAGAIN);
	ck_assert_int_ge((t1.tv_sec - t0.tv_sec) * 1000000000LL + t1.tv_nsec - t0.tv_nsec, 30000000);

	sig_call(&pt, &u, SYS_tkill, pt.tid, SIGUSR2, 0, 0);
	ck_assert_uint_ne(u.rip, SIG_HANDLER);
	sig_call(&pt, &u, SYS_rt_sigpending, scratch + 0xb20, 8, 0, 0);
	ck_assert_uint_eq(*(uint64_t *)gp(scratch + 0xb20, 8), SIG_BIT(SIGUSR2));
	sig_call(&pt, &u, SYS_rt_sigtimedwait, scratch + 0xb00, scratch + 0xc00, 0, 8);
	ck_assert_int_eq((int64_t)u.rax, SIGUSR2);
	ck_assert_int_eq(si->si_signo, SIGUSR2);
	ck_assert_int_eq(si->si_code, SI_TKILL);
	ck_assert_uint_ne(u.rip, SIG_HANDLER);
	sig_call(&pt, &u, SYS_rt_sigpending, scratch + 0xb20, 8, 0, 0);
	ck_assert_uint_eq(*(uint64_t *)gp(scratch + 0xb20, 8), 0);

	/* Another thread waits with no timeout; this one sends to the process. */
	sig_waiter_start(&w, &th);
	sig_settle();
	sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR2, 0, 0);
	pthread_join(th, NULL);
	ck_assert_int_eq((int64_t)w.u.rax, SIGUSR2);
	ck_assert_int_eq(((siginfo_t *)gp(scratch + 0xd00, sizeof(siginfo_t)))->si_code, SI_USER);
}
END_TEST

/* ITIMER_REAL ends a pause with SIGALRM (from the kernel, SI_KERNEL) and is then
 * disarmed; alarm returns the seconds that were left, rounded as Linux does. */
START_TEST(test_signal_itimer_and_alarm)
{
	struct cpu_regs u = sig_user();
	struct itimerval *it = gp(scratch + 0xb00, sizeof(*it));
	siginfo_t *si;

	sig_handle(SIGALRM, SIG_HANDLER, SA_SIGINFO, 0);
	*it = (struct itimerval){ .it_value = { .tv_usec = 20000 } };
	sig_call(&pt, &u, SYS_setitimer, ITIMER_REAL, scratch + 0xb00, 0, 0);
	ck_assert_uint_eq(u.rax, 0);
	sig_call(&pt, &u, SYS_getitimer, ITIMER_REAL, scratch + 0xb00, 0, 0);
	ck_assert_int_le(it->it_value.tv_usec, 20000);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_pause, 0, 0, 0, 0), LX_RESUME);
	ck_assert_uint_eq(u.rip, SIG_HANDLER);
	ck_assert_uint_eq(u.rdi, SIGALRM);
	si = gp(u.rsi, sizeof(*si));
	ck_assert_int_eq(si->si_code, SI_KERNEL);
	sig_return(&pt, &u);
	ck_assert_int_eq((int64_t)u.rax, -EINTR);
	sig_call(&pt, &u, SYS_getitimer, ITIMER_REAL, scratch + 0xb00, 0, 0);
	ck_assert_int_eq(it->it_value.tv_sec + it->it_value.tv_usec, 0);

	sig_call(&pt, &u, SYS_alarm, 100, 0, 0, 0);
	ck_assert_uint_eq(u.rax, 0);
	sig_call(&pt, &u, SYS_alarm, 0, 0, 0, 0);
	ck_assert_uint_eq(u.rax, 100);
	*it = (struct itimerval){ .it_value = { .tv_sec = 1 } };
	sig_call(&pt, &u, SYS_setitimer, ITIMER_VIRTUAL, scratch + 0xb00, 0, 0);
	ck_assert_int_eq((int64_t)u.rax, -ENOSYS);
	it->it_value.tv_usec = 1000000;
	sig_call(&pt, &u, SYS_setitimer, ITIMER_REAL, scratch + 0xb00, 0, 0);
	ck_assert_int_eq((int64_t)u.rax, -EINVAL);
}
END_TEST

/* A periodic POSIX timer whose signal is blocked queues it once: the expiries that
 * found it still queued are its overrun, which timer_getoverrun repeats; the siginfo
 * carries the timer's id and value. The counts add up to no more expiries than the
 * time allowed. Bad ids, flags, clocks and targets are refused; 32 timers at most. */
START_TEST(test_signal_posix_timer)
{
	const int rt = 35;
	const int64_t period = 5000000;
	struct cpu_regs u = sig_user();
	struct sigevent *ev = gp(scratch + 0xb00, sizeof(*ev));
	struct itimerspec *its = gp(scratch + 0xc00, sizeof(*its));
	siginfo_t *si = gp(scratch + 0xd00, sizeof(*si));
	int32_t *id = gp(scratch + 0xb80, sizeof(*id));
	struct timespec *gt = gp(scratch + 0xe00, sizeof(*gt)), nap = { .tv_nsec = 40000000 };
	int64_t expiries = 0, elapsed, t0;

	*(uint64_t *)gp(scratch + 0xa80, 8) = SIG_BIT(rt);
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xa80, 0, 8);
	*ev = (struct sigevent){ .sigev_notify = SIGEV_SIGNAL, .sigev_signo = rt,
				 .sigev_value.sival_int = 77 };
	sig_call(&pt, &u, SYS_timer_create, CLOCK_MONOTONIC, scratch + 0xb00, scratch + 0xb80, 0);
	ck_assert_uint_eq(u.rax, 0);
	*its = (struct itimerspec){ .it_value = { .tv_nsec = period },
				    .it_interval = { .tv_nsec = period } };
	/* Time on the guest's clock, the one timers count (its rate is the test's TSC). */
	S2(SYS_clock_gettime, CLOCK_MONOTONIC, scratch + 0xe00);
	t0 = gt->tv_sec * 1000000000LL + gt->tv_nsec;
	sig_call(&pt, &u, SYS_timer_settime, *id, 0, scratch + 0xc00, 0);
	ck_assert_uint_eq(u.rax, 0);
	nanosleep(&nap, NULL);
	for (int i = 0; i < 2; i++) {
		sig_call(&pt, &u, SYS_rt_sigtimedwait, scratch + 0xa80, scratch + 0xd00, 0, 8);
		ck_assert_int_eq((int64_t)u.rax, rt);
		ck_assert_int_eq(si->si_code, SI_TIMER);
		ck_assert_int_eq(si->si_timerid, *id);
		ck_assert_int_eq(si->si_value.sival_int, 77);
		ck_assert_int_ge(si->si_overrun, 0);
		expiries += 1 + si->si_overrun;
		sig_call(&pt, &u, SYS_timer_getoverrun, *id, 0, 0, 0);
		ck_assert_int_eq((int64_t)u.rax, si->si_overrun);
	}
	sig_call(&pt, &u, SYS_timer_gettime, *id, scratch + 0xc00, 0, 0);
	ck_assert_int_eq(its->it_interval.tv_nsec, period);
	ck_assert_int_le(its->it_value.tv_nsec, period);
	sig_call(&pt, &u, SYS_timer_delete, *id, 0, 0, 0);
	S2(SYS_clock_gettime, CLOCK_MONOTONIC, scratch + 0xe00);
	elapsed = gt->tv_sec * 1000000000LL + gt->tv_nsec - t0;
	ck_assert_int_le(expiries, elapsed / period + 1);
	sig_call(&pt, &u, SYS_timer_delete, *id, 0, 0, 0);
	ck_assert_int_eq((int64_t)u.rax, -EINVAL);

	ck_assert_int_eq(S4(SYS_timer_settime, 31, 0, scratch + 0xc00, 0), -EINVAL);
	ck_assert_int_eq(S3(SYS_timer_create, CLOCK_PROCESS_CPUTIME_ID, 0, scratch + 0xb80),
			 -ENOTSUP);
	ck_assert_int_eq(S3(SYS_timer_create, 99, 0, scratch + 0xb80), -EINVAL);
	*ev = (struct sigevent){ .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = rt };
	ev->_sigev_un._tid = pt.tid + 999;
	ck_assert_int_eq(S3(SYS_timer_create, CLOCK_MONOTONIC, scratch + 0xb00, scratch + 0xb80),
			 -EINVAL);
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(S3(SYS_timer_create, CLOCK_REALTIME, 0, scratch + 0xb80), 0);
	ck_assert_int_eq(S3(SYS_timer_create, CLOCK_REALTIME, 0, scratch + 0xb80), -EAGAIN);
	/* Absolute and already past: it fires at once (SIGALRM by default, kills), as
	 * the call returns or, if the timer thread is slower, in pause. */
	*its = (struct itimerspec){ .it_value = { .tv_sec = 1 } };
	if (sig_call(&pt, &u, SYS_timer_settime, 3, TIMER_ABSTIME, scratch + 0xc00, 0) == LX_RESUME)
		ck_assert_int_eq(sig_call(&pt, &u, SYS_pause, 0, 0, 0, 0), LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 128 + SIGALRM);
}
END_TEST

/* The process' state saved, checked, and restored into @mem2 (a copy of its memory) as
 * *@p2, with the signal hooks; the state, for the caller to free. */
static json_t *sig_save_and_restore(struct gmem *mem2, struct lx_proc **p2)
{
	struct lx_thread *threads[] = { &pt };
	const char *rw[] = { pdir };
	char err[256] = "";
	json_t *state = lx_state_save(pp, threads, 1);

	ck_assert_msg(lx_state_check(state, P_RAM, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(gmem_map(mem2, P_RAM), 0);
	memcpy(mem2->host, pmem.host, P_RAM);
	ck_assert_msg(lx_proc_restore(mem2, state, &(struct lx_restore_policy){
						  .root = "/", .rw = rw, .n_rw = 1, .hooks = &sig_hooks },
				      p2, err, sizeof(err)) == 0, "%s", err);
	return state;
}

/* A snapshot keeps signals: pending ones (the process' and a thread's, real-time ones
 * with their values), blocked, and armed timers; the restored thread takes them when
 * it unblocks them. A version 2 state (before signals were kept) still loads; a
 * damaged queue or a timer ccvm cannot make is refused, naming it. */
START_TEST(test_signal_state_round_trip)
{
	const int rt = 36;
	struct cpu_regs u = sig_user();
	struct itimerval *it = gp(scratch + 0xb00, sizeof(*it));
	siginfo_t *q = gp(scratch + 0xc00, sizeof(*q));
	struct lx_thread t2;
	struct lx_proc *p2;
	struct gmem mem2;
	char err[256] = "";
	json_t *state, *bad;
	void *old_host;

	sig_handle(rt, SIG_HANDLER, SA_SIGINFO, 0);
	*(uint64_t *)gp(scratch + 0xa80, 8) = SIG_BIT(rt) | SIG_BIT(SIGUSR1);
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xa80, 0, 8);
	sig_handle(SIGUSR1, SIG_HANDLER + 0x100, SA_SIGINFO, 0);
	sig_call(&pt, &u, SYS_tkill, pt.tid, SIGUSR1, 0, 0);
	*q = (siginfo_t){ .si_code = SI_QUEUE, .si_value.sival_int = 4242 };
	sig_call(&pt, &u, SYS_rt_sigqueueinfo, pp->pid, rt, scratch + 0xc00, 0);
	*it = (struct itimerval){ .it_value = { .tv_sec = 1000 } };
	sig_call(&pt, &u, SYS_setitimer, ITIMER_REAL, scratch + 0xb00, 0, 0);
	ck_assert_uint_eq(u.rax, 0);

	state = sig_save_and_restore(&mem2, &p2);
	ck_assert_int_eq(lx_thread_restore(p2, state, 0, &t2), 0);
	lx_clock_resume(p2, 0, P_TSC_KHZ, lx_clock_mono_ns(pp));
	ck_assert(p2->timers.t[LX_MAX_TIMERS].armed);
	ck_assert_int_eq(p2->timers.t[LX_MAX_TIMERS].deadline, pp->timers.t[LX_MAX_TIMERS].deadline);
	ck_assert_uint_eq(p2->sigpend.set, SIG_BIT(rt));
	ck_assert_uint_eq(t2.sigmask, SIG_BIT(rt) | SIG_BIT(SIGUSR1));

	/* The restored thread unblocks: SIGUSR1 (its own) first, then the queued one. */
	u.rsp = scratch + SIG_STACK;
	old_host = pmem.host;
	pmem.host = mem2.host; /* gp() reads the restored memory for a while */
	*(uint64_t *)gp(scratch + 0xa80, 8) = 0;
	sig_call(&t2, &u, SYS_rt_sigprocmask, SIG_SETMASK, scratch + 0xa80, 0, 8);
	ck_assert_uint_eq(u.rip, SIG_HANDLER); /* nested: rt on top of SIGUSR1 */
	ck_assert_int_eq(((siginfo_t *)gp(u.rsi, sizeof(siginfo_t)))->si_value.sival_int, 4242);
	sig_return(&t2, &u);
	ck_assert_uint_eq(u.rip, SIG_HANDLER + 0x100);
	pmem.host = old_host;

	/* Version 2: no signals kept, still read. Damaged: refused by name. */
	bad = json_deep_copy(state);
	json_object_set_new(bad, "version", json_integer(2));
	json_object_del(bad, "sigpending");
	json_object_del(bad, "timers");
	ck_assert_msg(lx_state_check(bad, P_RAM, err, sizeof(err)) == 0, "%s", err);
	json_object_set_new(bad, "sigpending", json_pack("[s]", "00ff"));
	ck_assert_int_eq(lx_state_check(bad, P_RAM, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "sigpending"));
	json_object_del(bad, "sigpending");
	json_object_set_new(bad, "timers", json_pack("[{s:i, s:i, s:i, s:i, s:I, s:I}]", "id", 0,
						      "clock", 99, "notify", 0, "signo", 14,
						      "deadline", (json_int_t)1, "interval",
						      (json_int_t)0));
	ck_assert_int_eq(lx_state_check(bad, P_RAM, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "timers[0]"));
	json_decref(bad);
	json_decref(state);
	lx_proc_destroy(p2);
	gmem_unmap(&mem2);
}
END_TEST

/* A signal for a thread blocked in a host call kicks it out: read of an empty pipe
 * ends, the handler sees EINTR without SA_RESTART, and with SA_RESTART its frame
 * holds the call to make again (RAX the call's number, RIP on `syscall`). */
START_TEST(test_signal_interrupts_blocking_read)
{
	struct cpu_regs u = sig_user();
	int *fds = gp(scratch + 0xb00, 2 * sizeof(int));
	static struct sig_waiter w; /* senders may look at it until the process is gone */
	ucontext_t *uc;
	pthread_t th;

	ck_assert_int_eq(S2(SYS_pipe2, scratch + 0xb00, 0), 0);
	w = (struct sig_waiter){ .nr = SYS_read, .a = { (uint64_t)fds[0], scratch + 0xc00, 16 } };
	sig_handle(SIGUSR1, SIG_HANDLER, SA_SIGINFO, 0);
	sig_waiter_start(&w, &th);
	sig_settle();
	sig_call(&pt, &u, SYS_tgkill, pp->pid, w.t.tid, SIGUSR1, 0);
	pthread_join(th, NULL);
	ck_assert_uint_eq(w.u.rip, SIG_HANDLER);
	uc = gp(w.u.rdx, sizeof(*uc) - sizeof(uc->__fpregs_mem) - sizeof(uc->__ssp));
	ck_assert_int_eq((int64_t)uc->uc_mcontext.gregs[REG_RAX], -EINTR);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RIP], SIG_CODE + 2);
	sig_return(&w.t, &w.u); /* the handler's mask goes */

	sig_handle(SIGUSR1, SIG_HANDLER, SA_SIGINFO | SA_RESTART, 0);
	w.u = sig_user();
	w.u.rsp = scratch + SIG_STACK - 0x8000;
	ck_assert_int_eq(pthread_create(&th, NULL, sig_waiter_run, &w), 0);
	w.th = th;
	sig_settle();
	sig_call(&pt, &u, SYS_tgkill, pp->pid, w.t.tid, SIGUSR1, 0);
	pthread_join(th, NULL);
	ck_assert_uint_eq(w.u.rip, SIG_HANDLER);
	uc = gp(w.u.rdx, sizeof(*uc) - sizeof(uc->__fpregs_mem) - sizeof(uc->__ssp));
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RAX], SYS_read);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RIP], SIG_CODE);
	sig_return(&w.t, &w.u);
	ck_assert_uint_eq(w.u.rip, SIG_CODE); /* where `syscall` runs again */
	ck_assert_uint_eq(w.u.rax, SYS_read);
}
END_TEST

/* A kick that lands just before the host call it was meant to end is lost; the timer
 * thread kicks again while the thread stays blocked with a signal to take. */
START_TEST(test_signal_lost_kick)
{
	struct cpu_regs u = sig_user();
	int *fds = gp(scratch + 0xb00, 2 * sizeof(int));
	static struct sig_waiter w; /* senders may look at it until the process is gone */
	pthread_t th;

	ck_assert_int_eq(S2(SYS_pipe2, scratch + 0xb00, 0), 0);
	w = (struct sig_waiter){ .nr = SYS_read, .a = { (uint64_t)fds[0], scratch + 0xc00, 16 } };
	sig_handle(SIGUSR1, SIG_HANDLER, 0, 0);
	sig_waiter_start(&w, &th);
	sig_settle();
	sig_kicks_lost = 1;
	sig_call(&pt, &u, SYS_tgkill, pp->pid, w.t.tid, SIGUSR1, 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(sig_kicks_lost, 0);
	ck_assert_uint_eq(w.u.rip, SIG_HANDLER);
}
END_TEST

/* alarm's SIGALRM ends the calling thread's own blocking read (the acceptance's
 * case), and a nanosleep it interrupts tells the time that was left. */
START_TEST(test_signal_alarm_interrupts_read_and_sleep)
{
	struct cpu_regs u = sig_user();
	int *fds = gp(scratch + 0xb00, 2 * sizeof(int));
	struct itimerval *it = gp(scratch + 0xb40, sizeof(*it));
	struct timespec *req = gp(scratch + 0xb80, sizeof(*req)), *rem = req + 1;

	ck_assert_int_eq(S2(SYS_pipe2, scratch + 0xb00, 0), 0);
	sig_handle(SIGALRM, SIG_HANDLER, 0, 0);
	*it = (struct itimerval){ .it_value = { .tv_usec = 30000 } };
	sig_call(&pt, &u, SYS_setitimer, ITIMER_REAL, scratch + 0xb40, 0, 0);
	sig_call(&pt, &u, SYS_read, fds[0], scratch + 0xc00, 16, 0);
	ck_assert_uint_eq(u.rip, SIG_HANDLER);
	sig_return(&pt, &u);
	ck_assert_int_eq((int64_t)u.rax, -EINTR);

	sig_call(&pt, &u, SYS_setitimer, ITIMER_REAL, scratch + 0xb40, 0, 0);
	*req = (struct timespec){ .tv_sec = 100 };
	sig_call(&pt, &u, SYS_nanosleep, scratch + 0xb80, scratch + 0xb90, 0, 0);
	ck_assert_uint_eq(u.rip, SIG_HANDLER);
	sig_return(&pt, &u);
	ck_assert_int_eq((int64_t)u.rax, -EINTR);
	ck_assert_int_gt(rem->tv_sec, 90);
	ck_assert_int_lt(rem->tv_sec, 100);
}
END_TEST

/* ppoll waits with its own mask: a signal the thread blocks gets in while it waits,
 * ends it with EINTR, and the handler's frame keeps the thread's mask for afterwards. */
START_TEST(test_signal_ppoll_mask)
{
	struct cpu_regs u = sig_user();
	int *fds = gp(scratch + 0xb00, 2 * sizeof(int));
	struct pollfd *pfd = gp(scratch + 0xb40, sizeof(*pfd));
	static struct sig_waiter w; /* senders may look at it until the process is gone */
	ucontext_t *uc;
	pthread_t th;

	ck_assert_int_eq(S2(SYS_pipe2, scratch + 0xb00, 0), 0);
	*pfd = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	sig_handle(SIGUSR2, SIG_HANDLER, SA_SIGINFO, 0);
	*(uint64_t *)gp(scratch + 0xa80, 8) = SIG_BIT(SIGUSR2);
	*(uint64_t *)gp(scratch + 0xa88, 8) = 0;
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xa80, 0, 8);
	w = (struct sig_waiter){ .nr = SYS_ppoll, .a = { scratch + 0xb40, 1, 0, scratch + 0xa88, 8 } };
	sig_waiter_start(&w, &th);
	sig_settle();
	sig_call(&pt, &u, SYS_tgkill, pp->pid, w.t.tid, SIGUSR2, 0);
	pthread_join(th, NULL);
	ck_assert_uint_eq(w.u.rip, SIG_HANDLER);
	uc = gp(w.u.rdx, offsetof(ucontext_t, uc_sigmask) + 8);
	ck_assert_int_eq((int64_t)uc->uc_mcontext.gregs[REG_RAX], -EINTR);
	ck_assert_uint_eq(uc->uc_sigmask.__val[0], SIG_BIT(SIGUSR2));
	sig_return(&w.t, &w.u);
	ck_assert_uint_eq(w.t.sigmask, SIG_BIT(SIGUSR2));
}
END_TEST

/* Guest poll of guest fd @fd with no wait: its revents. */
static short sfd_poll(struct cpu_regs *u, int fd)
{
	struct pollfd *pfd = gp(scratch + 0xb40, sizeof(*pfd));

	*pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	sig_call(&pt, u, SYS_poll, scratch + 0xb40, 1, 0, 0);
	ck_assert_int_ge((int64_t)u->rax, 0);
	return pfd->revents;
}

/* A signalfd shows blocked signals of its mask as poll sees descriptors (readable
 * exactly while one is pending) and reads them as struct signalfd_siginfo, the
 * thread's own first, records across iovecs; signalfd4 on it changes its mask, a
 * duplicate is the same signalfd, and bad calls fail as Linux's do. */
START_TEST(test_signalfd_reads_and_polls)
{
	struct cpu_regs u = sig_user();
	struct signalfd_siginfo *r = gp(scratch + 0xc00, 2 * sizeof(*r));
	struct iovec *iov = gp(scratch + 0xb80, 2 * sizeof(*iov));
	siginfo_t *q = gp(scratch + 0xd00, sizeof(*q));
	int fd, dup_fd;

	*(uint64_t *)gp(scratch + 0xa80, 8) = SIG_BIT(SIGUSR1) | SIG_BIT(SIGUSR2);
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xa80, 0, 8);
	*(uint64_t *)gp(scratch + 0xb00, 8) = SIG_BIT(SIGUSR1) | SIG_BIT(SIGUSR2) | SIG_BIT(SIGKILL);
	sig_call(&pt, &u, SYS_signalfd4, (uint64_t)-1, scratch + 0xb00, 8, SFD_NONBLOCK | SFD_CLOEXEC);
	fd = (int)u.rax;
	ck_assert_int_ge(fd, 0);
	sig_call(&pt, &u, SYS_read, fd, scratch + 0xc00, sizeof(*r), 0);
	ck_assert_int_eq((int64_t)u.rax, -EAGAIN);
	ck_assert_int_eq(sfd_poll(&u, fd), 0);

	*q = (siginfo_t){ .si_code = SI_QUEUE, .si_value.sival_int = 77 };
	sig_call(&pt, &u, SYS_rt_sigqueueinfo, pp->pid, SIGUSR2, scratch + 0xd00, 0);
	sig_call(&pt, &u, SYS_tkill, pt.tid, SIGUSR1, 0, 0);
	ck_assert_int_eq(sfd_poll(&u, fd), POLLIN);
	sig_call(&pt, &u, SYS_read, fd, scratch + 0xc00, sizeof(*r) - 1, 0);
	ck_assert_int_eq((int64_t)u.rax, -EINVAL);
	iov[0] = (struct iovec){ .iov_base = (void *)(scratch + 0xc00), .iov_len = 100 };
	iov[1] = (struct iovec){ .iov_base = (void *)(scratch + 0xc00 + 100), .iov_len = 300 };
	sig_call(&pt, &u, SYS_readv, fd, scratch + 0xb80, 2, 0);
	ck_assert_int_eq((int64_t)u.rax, 2 * sizeof(*r));
	ck_assert_uint_eq(r[0].ssi_signo, SIGUSR1);
	ck_assert_int_eq(r[0].ssi_code, SI_TKILL);
	ck_assert_uint_eq(r[0].ssi_pid, pp->pid);
	ck_assert_uint_eq(r[1].ssi_signo, SIGUSR2);
	ck_assert_int_eq(r[1].ssi_code, SI_QUEUE);
	ck_assert_int_eq(r[1].ssi_int, 77);
	ck_assert_int_eq(sfd_poll(&u, fd), 0);

	/* A new mask: SIGUSR1 stays pending, out of it, until the mask takes it in. */
	*(uint64_t *)gp(scratch + 0xb00, 8) = SIG_BIT(SIGUSR2);
	sig_call(&pt, &u, SYS_signalfd4, fd, scratch + 0xb00, 8, 0);
	ck_assert_int_eq((int64_t)u.rax, fd);
	sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR1, 0, 0);
	ck_assert_int_eq(sfd_poll(&u, fd), 0);
	dup_fd = S1(SYS_dup, fd);
	ck_assert_int_ge(dup_fd, 0);
	*(uint64_t *)gp(scratch + 0xb00, 8) = SIG_BIT(SIGUSR1);
	sig_call(&pt, &u, SYS_signalfd, dup_fd, scratch + 0xb00, 8, 0);
	ck_assert_int_eq(sfd_poll(&u, fd), POLLIN);
	sig_call(&pt, &u, SYS_read, fd, scratch + 0xc00, 3 * sizeof(*r), 0);
	ck_assert_int_eq((int64_t)u.rax, sizeof(*r));
	ck_assert_uint_eq(r[0].ssi_signo, SIGUSR1);
	ck_assert_int_eq(r[0].ssi_code, SI_USER);

	/* Not a signalfd, not a descriptor, a bad size or flags. */
	ck_assert_int_eq(S2(SYS_pipe2, scratch + 0xb20, 0), 0);
	sig_call(&pt, &u, SYS_signalfd4, *(int *)gp(scratch + 0xb20, 4), scratch + 0xb00, 8, 0);
	ck_assert_int_eq((int64_t)u.rax, -EINVAL);
	sig_call(&pt, &u, SYS_signalfd4, 999, scratch + 0xb00, 8, 0);
	ck_assert_int_eq((int64_t)u.rax, -EBADF);
	sig_call(&pt, &u, SYS_signalfd4, (uint64_t)-1, scratch + 0xb00, 4, 0);
	ck_assert_int_eq((int64_t)u.rax, -EINVAL);
	sig_call(&pt, &u, SYS_signalfd4, (uint64_t)-1, scratch + 0xb00, 8, 1);
	ck_assert_int_eq((int64_t)u.rax, -EINVAL);

	/* Closed ones go when new ones are made: no limit reached by a loop. */
	ck_assert_int_eq(S1(SYS_close, fd), 0);
	ck_assert_int_eq(S1(SYS_close, dup_fd), 0);
	for (int i = 0; i < 3 * LX_MAX_SIGFDS; i++) {
		sig_call(&pt, &u, SYS_signalfd4, (uint64_t)-1, scratch + 0xb00, 8, 0);
		ck_assert_int_ge((int64_t)u.rax, 0);
		ck_assert_int_eq(S1(SYS_close, u.rax), 0);
	}
	ck_assert_int_le(pp->n_sigfds, 1);
}
END_TEST

/* A blocking read waits for the first signal of the mask, sent by another thread;
 * a signal the reader takes with a handler ends it with EINTR instead. */
START_TEST(test_signalfd_blocking_read)
{
	struct cpu_regs u = sig_user();
	static struct sig_waiter w; /* senders may look at it until the process is gone */
	struct signalfd_siginfo *r = gp(scratch + 0xc00, sizeof(*r));
	pthread_t th;
	int fd;

	sig_handle(SIGUSR2, SIG_HANDLER, SA_SIGINFO, 0);
	*(uint64_t *)gp(scratch + 0xa80, 8) = SIG_BIT(SIGUSR1);
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xa80, 0, 8);
	sig_call(&pt, &u, SYS_signalfd4, (uint64_t)-1, scratch + 0xa80, 8, 0);
	fd = (int)u.rax;
	ck_assert_int_ge(fd, 0);
	w = (struct sig_waiter){ .nr = SYS_read, .a = { (uint64_t)fd, scratch + 0xc00, sizeof(*r) } };
	sig_waiter_start(&w, &th); /* inherits the mask: SIGUSR1 blocked */
	sig_settle();
	sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR1, 0, 0);
	pthread_join(th, NULL);
	ck_assert_int_eq((int64_t)w.u.rax, sizeof(*r));
	ck_assert_uint_eq(r->ssi_signo, SIGUSR1);
	ck_assert_uint_ne(w.u.rip, SIG_HANDLER);

	w.u = sig_user();
	w.u.rsp = scratch + SIG_STACK - 0x8000;
	ck_assert_int_eq(pthread_create(&th, NULL, sig_waiter_run, &w), 0);
	w.th = th;
	sig_expect_eintr(&w, th, &u, SIGUSR2);
}
END_TEST

/* A snapshot keeps a signalfd: its mask, the duplicate that shares it, and a
 * pending signal of its mask, which makes the restored one readable. */
START_TEST(test_signalfd_state_round_trip)
{
	struct cpu_regs u = sig_user();
	uint64_t mask, ino, ino2;
	struct lx_thread t2;
	struct lx_proc *p2;
	struct gmem mem2;
	json_t *state;
	int fd, dup_fd;

	*(uint64_t *)gp(scratch + 0xa80, 8) = SIG_BIT(SIGUSR1) | SIG_BIT(SIGHUP);
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xa80, 0, 8);
	sig_call(&pt, &u, SYS_signalfd4, (uint64_t)-1, scratch + 0xa80, 8, SFD_NONBLOCK);
	fd = (int)u.rax;
	dup_fd = S1(SYS_dup, fd);
	ck_assert_int_ge(dup_fd, 0);
	sig_call(&pt, &u, SYS_tkill, pt.tid, SIGHUP, 0, 0);

	state = sig_save_and_restore(&mem2, &p2);
	ck_assert_int_eq(p2->n_sigfds, 1);
	ck_assert_int_eq(lx_sigfd_mask(p2, lx_fd_host(p2, fd), &mask, &ino), 0);
	ck_assert_uint_eq(mask, SIG_BIT(SIGUSR1) | SIG_BIT(SIGHUP));
	ck_assert_int_eq(lx_sigfd_mask(p2, lx_fd_host(p2, dup_fd), &mask, &ino2), 0);
	ck_assert_uint_eq(ino, ino2);
	ck_assert(fcntl(lx_fd_host(p2, fd), F_GETFL) & O_NONBLOCK);
	ck_assert_int_eq(poll(&(struct pollfd){ .fd = lx_fd_host(p2, fd), .events = POLLIN }, 1, 0), 0);
	ck_assert_int_eq(lx_thread_restore(p2, state, 0, &t2), 0); /* its SIGHUP */
	ck_assert_int_eq(poll(&(struct pollfd){ .fd = lx_fd_host(p2, fd), .events = POLLIN }, 1, 0), 1);
	json_decref(state);
	lx_proc_destroy(p2);
	gmem_unmap(&mem2);
}
END_TEST

/* Each CPU exception maps to the signal, si_code and si_addr Linux gives; a floating-
 * point exception with nothing unmasked raised is no signal. */
START_TEST(test_signal_fault_info)
{
	const uint64_t rip = 0x400500;
	struct {
		struct lx_fault f;
		uint64_t rflags;
		int sig, code;
		uint64_t addr;
	} cases[] = {
		{ { .vector = 14, .error_code = 6, .cr2 = 0x10 }, 0, SIGSEGV, SEGV_MAPERR, 0x10 },
		/* ccvm's tables may map page 0 for the supervisor: P is no guide */
		{ { .vector = 14, .error_code = 7, .cr2 = 0x10 }, 0, SIGSEGV, SEGV_MAPERR, 0x10 },
		{ { .vector = 14, .error_code = 7, .cr2 = 0x5000, .mapped = true }, 0, SIGSEGV,
		  SEGV_ACCERR, 0x5000 },
		{ { .vector = 13 }, 0, SIGSEGV, SI_KERNEL, 0 },
		{ { .vector = 6 }, 0, SIGILL, ILL_ILLOPN, rip },
		{ { .vector = 0 }, 0, SIGFPE, FPE_INTDIV, rip },
		{ { .vector = 3 }, 0, SIGTRAP, SI_KERNEL, 0 },
		{ { .vector = 1 }, RFLAGS_TF, SIGTRAP, TRAP_TRACE, rip },
		{ { .vector = 17 }, 0, SIGBUS, BUS_ADRALN, 0 },
		{ { .vector = 11 }, 0, SIGBUS, SI_KERNEL, 0 },
		{ { .vector = 19, .mxcsr = (0x1f80 & ~0x200U) | 0x4 }, 0, SIGFPE, FPE_FLTDIV, rip },
		{ { .vector = 16, .fcw = 0x37e, .fsw = 0x1 }, 0, SIGFPE, FPE_FLTINV, rip },
	};
	siginfo_t info;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(lx_fault_info(&cases[i].f, rip, cases[i].rflags, &info), 0);
		ck_assert_msg(info.si_signo == cases[i].sig && info.si_code == cases[i].code &&
			      (uint64_t)(uintptr_t)info.si_addr == cases[i].addr,
			      "vector %d: signal %d code %d addr %p", cases[i].f.vector,
			      info.si_signo, info.si_code, info.si_addr);
		ck_assert_int_eq(lx_fault_signal(cases[i].f.vector), cases[i].sig);
	}
	/* Divide by zero raised but masked: spurious. */
	ck_assert_int_eq(lx_fault_info(&(struct lx_fault){ .vector = 19, .mxcsr = 0x1f80 | 0x4 },
				       rip, 0, &info), -EAGAIN);
}
END_TEST

/* A fault in the middle of user code reaches the SIGSEGV handler with every register
 * as the CPU left it (RCX and R11 too, which no system call clobbered), the trap
 * number, error code and address in the frame; rt_sigreturn goes back exactly there.
 * Blocked, ignored or unhandled, the default action applies (the VM's crash report). */
START_TEST(test_signal_fault_delivery)
{
	struct cpu_regs u = sig_user(), r;
	struct cpu_segs sregs = { 0 };
	struct lx_fault pf = { .vector = 14, .error_code = 6, .cr2 = 0x10 };
	ucontext_t *uc;
	siginfo_t *si;

	ck_assert(!lx_fault(&pt, &u, &sregs, &pf)); /* no handler: the crash report */
	sig_handle(SIGSEGV, SIG_HANDLER, SA_SIGINFO, 0);
	u = sig_user();
	u.rip = 0x400500;
	u.rcx = 0x1234;
	u.r11 = 0x5678;
	r = u;
	ck_assert(lx_fault(&pt, &r, &sregs, &pf));
	ck_assert_uint_eq(r.rip, SIG_HANDLER);
	ck_assert_uint_eq(r.rdi, SIGSEGV);
	ck_assert(pt.resume_exact);
	si = gp(r.rsi, sizeof(*si));
	ck_assert_int_eq(si->si_code, SEGV_MAPERR);
	ck_assert_ptr_eq(si->si_addr, (void *)0x10);
	uc = gp(r.rdx, offsetof(ucontext_t, uc_sigmask) + 8);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RIP], 0x400500);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_RCX], 0x1234);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_R11], 0x5678);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_TRAPNO], 14);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_ERR], 6);
	ck_assert_uint_eq(uc->uc_mcontext.gregs[REG_CR2], 0x10);
	sig_return(&pt, &r);
	ck_assert(pt.resume_exact);
	ck_assert_uint_eq(r.rip, 0x400500);
	ck_assert_uint_eq(r.rcx, 0x1234);
	ck_assert_uint_eq(r.r11, 0x5678);

	/* Blocked: the handler does not get it; the program dies of it. */
	*(uint64_t *)gp(scratch + 0xa80, 8) = SIG_BIT(SIGSEGV);
	sig_call(&pt, &u, SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xa80, 0, 8);
	r = u;
	ck_assert(!lx_fault(&pt, &r, &sregs, &pf));
	ck_assert_uint_eq(pp->sigact[SIGSEGV].handler, (uint64_t)(uintptr_t)SIG_DFL);
	/* Without delivery (no fpu hooks) every fault is the crash report, as before. */
	pp->hooks = &p_hooks;
	sig_handle(SIGSEGV, SIG_HANDLER, SA_SIGINFO, 0);
	r = u;
	ck_assert(!lx_fault(&pt, &r, &sregs, &pf));
}
END_TEST

/* A program starts with the signals ignored that its caller ignored, as exec leaves
 * them: what lx_sig_inherited reads from this process (never SIGKILL or SIGSTOP). */
START_TEST(test_signal_inherited)
{
	char *argv[] = { "true", NULL }, *envp[] = { NULL };
	struct lx_config cfg = { .program = P_PROGRAM, .argc = 1, .argv = argv, .envp = envp,
				 .root = "/" };
	struct lx_entry entry;
	struct lx_proc *p2;
	struct gmem mem2;

	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR2, SIG_DFL);
	cfg.ignored_signals = lx_sig_inherited() | SIG_BIT(SIGKILL);
	ck_assert_uint_eq(cfg.ignored_signals & SIG_BIT(SIGHUP), SIG_BIT(SIGHUP));
	ck_assert_uint_eq(cfg.ignored_signals & SIG_BIT(SIGUSR2), 0);
	ck_assert_int_eq(gmem_map(&mem2, P_RAM), 0);
	ck_assert_int_eq(lx_proc_create(&mem2, &cfg, &p2, &entry), 0);
	ck_assert_uint_eq(p2->sigact[SIGHUP].handler, (uint64_t)(uintptr_t)SIG_IGN);
	ck_assert_uint_eq(p2->sigact[SIGUSR2].handler, (uint64_t)(uintptr_t)SIG_DFL);
	ck_assert_uint_eq(p2->sigact[SIGKILL].handler, (uint64_t)(uintptr_t)SIG_DFL);
	lx_proc_destroy(p2);
	gmem_unmap(&mem2);
}
END_TEST

/* timerfd: a host timerfd on the guest's clock; read gives the expirations, an
 * absolute time already past fires at once, gettime shows the period; bad clocks,
 * flags and descriptors are refused; a snapshot keeps it armed. */
START_TEST(test_timerfd)
{
	struct itimerspec *its = gp(scratch + 0xb00, sizeof(*its));
	uint64_t *ticks = gp(scratch + 0xc00, sizeof(*ticks));
	struct timespec *now = gp(scratch + 0xd00, sizeof(*now));
	struct lx_thread *threads[] = { &pt };
	char err[256] = "";
	json_t *state, *fd;
	int64_t tfd;
	size_t i;

	ck_assert_int_eq(S2(SYS_timerfd_create, 12345, 0), -EINVAL);
	ck_assert_int_eq(S2(SYS_timerfd_create, CLOCK_MONOTONIC, 0x4), -EINVAL);
	tfd = S2(SYS_timerfd_create, CLOCK_MONOTONIC, TFD_CLOEXEC);
	ck_assert_int_ge(tfd, 0);
	*its = (struct itimerspec){ .it_value = { .tv_nsec = 2000000 } };
	ck_assert_int_eq(S4(SYS_timerfd_settime, tfd, 0, scratch + 0xb00, 0), 0);
	ck_assert_int_eq(S3(SYS_read, tfd, scratch + 0xc00, 8), 8);
	ck_assert_uint_ge(*ticks, 1);
	/* Absolute, on the guest's clock, already past: at once. */
	S2(SYS_clock_gettime, CLOCK_MONOTONIC, scratch + 0xd00);
	*its = (struct itimerspec){ .it_value = { .tv_sec = now->tv_sec - 1 } };
	ck_assert_int_eq(S4(SYS_timerfd_settime, tfd, TFD_TIMER_ABSTIME, scratch + 0xb00, 0), 0);
	ck_assert_int_eq(S3(SYS_read, tfd, scratch + 0xc00, 8), 8);
	*its = (struct itimerspec){ .it_value = { .tv_sec = 100 }, .it_interval = { .tv_sec = 7 } };
	ck_assert_int_eq(S4(SYS_timerfd_settime, tfd, 0, scratch + 0xb00, 0), 0);
	ck_assert_int_eq(S2(SYS_timerfd_gettime, tfd, scratch + 0xb00), 0);
	ck_assert_int_eq(its->it_interval.tv_sec, 7);
	ck_assert_int_gt(its->it_value.tv_sec, 90);
	ck_assert_int_eq(S4(SYS_timerfd_settime, tfd, 0x80, scratch + 0xb00, 0), -EINVAL);
	ck_assert_int_eq(S2(SYS_timerfd_gettime, 0, scratch + 0xb00), -EINVAL);

	state = lx_state_save(pp, threads, 1);
	ck_assert_msg(lx_state_check(state, P_RAM, err, sizeof(err)) == 0, "%s", err);
	json_array_foreach(json_object_get(state, "fds"), i, fd)
		if (json_integer_value(json_object_get(fd, "fd")) == tfd) {
			ck_assert_str_eq(json_string_value(json_object_get(fd, "kind")), "timerfd");
			ck_assert_int_eq(json_integer_value(json_object_get(fd, "interval_ns")),
					 7000000000LL);
			json_object_set_new(fd, "clock", json_integer(99));
		}
	ck_assert_int_eq(lx_state_check(state, P_RAM, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "timerfd"));
	json_decref(state);
}
END_TEST

/* Without the VM's FPU hooks nothing is delivered: a signal the guest sends itself
 * takes its default action even with a handler, and rt_sigreturn is not offered. */
START_TEST(test_signal_off)
{
	struct cpu_regs u = sig_user();

	ck_assert_int_eq(sig_call(&pt, &u, SYS_rt_sigreturn, 0, 0, 0, 0), LX_RESUME);
	ck_assert_int_eq((int64_t)u.rax, -ENOSYS);
	ck_assert_int_eq(S3(SYS_timer_create, CLOCK_MONOTONIC, 0, scratch + 0xb80), -ENOSYS);
	ck_assert_int_eq(S1(SYS_alarm, 5), -ENOSYS);
	sig_handle(SIGUSR1, SIG_HANDLER, 0, 0);
	ck_assert_int_eq(sig_call(&pt, &u, SYS_kill, pp->pid, SIGUSR1, 0, 0), LX_EXIT_GROUP);
	ck_assert_int_eq(pp->exit_status, 128 + SIGUSR1);
}
END_TEST

/* ---- processes (ptree.c): fork's copy, wait, SIGCHLD, groups ---- */

static struct lx_tree ptr;

/* A child of pp as fork's personality half makes it, with a thread to call on. */
static struct lx_proc *pt_fork(struct lx_proc *parent, struct lx_thread *t)
{
	struct lx_proc *c = NULL;

	ck_assert_int_eq(lx_proc_fork(parent, &c), 0);
	lx_thread_init(c, t, NULL);
	return c;
}

static void pt_sigaction(int sig, uint64_t handler, uint64_t flags)
{
	uint64_t *act = gp(scratch + 0xe00, 32);

	act[0] = handler;
	act[1] = flags;
	act[2] = act[3] = 0;
	ck_assert_int_eq(S4(SYS_rt_sigaction, sig, scratch + 0xe00, 0, 8), 0);
}

/* A child gets the parent's open files (one offset between them, as fork's
 * duplicates share it), working directory, umask, dispositions and memory map, a pid
 * of its own, and the parent as its parent; nothing pending. */
START_TEST(test_ptree_fork_copies)
{
	struct lx_thread ct;
	struct lx_proc *c;
	int64_t fd;

	ck_assert_int_eq(lx_tree_init(&ptr, pp, 8), 0);
	fd = S4(SYS_openat, AT_FDCWD, gpath(0, "forked"), O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 3);
	ck_assert_int_eq(S3(SYS_write, fd, gstr(0x100, "abc"), 3), 3);
	ck_assert_int_eq(S1(SYS_chdir, gstr(0x200, pdir)), 0);
	S1(SYS_umask, 027);
	pt_sigaction(SIGUSR1, 0x401000, 0);
	c = pt_fork(pp, &ct);
	ck_assert_int_ne(c->pid, pp->pid);
	ck_assert_int_eq(psys_on(&ct, SYS_getpid, 0, 0, 0, 0, 0, 0, NULL), c->pid);
	ck_assert_int_eq(psys_on(&ct, SYS_getppid, 0, 0, 0, 0, 0, 0, NULL), pp->pid);
	ck_assert_int_eq(psys_on(&ct, SYS_getpgid, 0, 0, 0, 0, 0, 0, NULL), S1(SYS_getpgid, 0));
	ck_assert_int_eq(psys_on(&ct, SYS_write, fd, gstr(0x100, "de"), 2, 0, 0, 0, NULL), 2);
	ck_assert_int_eq(S3(SYS_lseek, fd, 0, SEEK_CUR), 5); /* the child's write moved it */
	ck_assert_int_eq(psys_on(&ct, SYS_getcwd, scratch + 0x300, 256, 0, 0, 0, 0, NULL),
			 (int64_t)strlen(pdir) + 1);
	ck_assert_str_eq(gp(scratch + 0x300, 1), pdir);
	ck_assert_int_eq(psys_on(&ct, SYS_umask, 022, 0, 0, 0, 0, 0, NULL), 027);
	ck_assert_int_eq(psys_on(&ct, SYS_rt_sigaction, SIGUSR1, 0, scratch + 0xf00, 8, 0, 0,
				 NULL), 0);
	ck_assert_uint_eq(*(uint64_t *)gp(scratch + 0xf00, 8), 0x401000);
	ck_assert_int_eq(c->mm.map.n, pp->mm.map.n);
	ck_assert_uint_eq(c->sigpend.set, 0);
	ck_assert_int_eq(psys_on(&ct, SYS_close, fd, 0, 0, 0, 0, 0, NULL), 0);
	ck_assert_int_eq(S3(SYS_write, fd, gstr(0x100, "f"), 1), 1); /* still the parent's */
	ck_assert_int_gt(lx_new_id(pp), c->pid); /* threads and processes: one id space */
	lx_proc_destroy(c);
	lx_tree_fini(&ptr);
}
END_TEST

/* wait4: nothing to reap yet is 0 with WNOHANG, a pid that is no child is ECHILD; an
 * ended child queues SIGCHLD with its pid and status, is reaped once, then gone. */
START_TEST(test_ptree_wait_and_sigchld)
{
	struct lx_thread ct;
	struct lx_proc *c;
	siginfo_t *si = gp(scratch + 0xa00, sizeof(siginfo_t));
	int pid;

	ck_assert_int_eq(lx_tree_init(&ptr, pp, 8), 0);
	ck_assert_int_eq(S4(SYS_wait4, -1, 0, WNOHANG, 0), -ECHILD);
	*(uint64_t *)gp(scratch + 0xb00, 8) = 1ULL << (SIGCHLD - 1);
	ck_assert_int_eq(S4(SYS_rt_sigprocmask, SIG_BLOCK, scratch + 0xb00, 0, 8), 0);
	c = pt_fork(pp, &ct);
	pid = c->pid;
	ck_assert_int_eq(S4(SYS_wait4, -1, scratch, WNOHANG, 0), 0);
	ck_assert_int_eq(S4(SYS_wait4, pid + 1000, scratch, WNOHANG, 0), -ECHILD);
	ck_assert_int_eq(S4(SYS_wait4, -1, 0, 0x100, 0), -EINVAL);
	lx_proc_ended(c, 7 << 8);
	*(int64_t *)gp(scratch + 0xc00, 16) = 0;
	*(int64_t *)gp(scratch + 0xc08, 8) = 0;
	ck_assert_int_eq(S4(SYS_rt_sigtimedwait, scratch + 0xb00, scratch + 0xa00, scratch + 0xc00, 8),
			 SIGCHLD);
	ck_assert_int_eq(si->si_pid, pid);
	ck_assert_int_eq(si->si_code, CLD_EXITED);
	ck_assert_int_eq(si->si_status, 7);
	*(int *)gp(scratch, 4) = -1;
	/* a pid_t -1 as libc passes it: the register's upper half zero */
	ck_assert_int_eq(S4(SYS_wait4, 0xffffffffULL, scratch, 0, scratch + 0x40), pid);
	ck_assert_int_eq(*(int *)gp(scratch, 4), 7 << 8);
	ck_assert_int_eq(S4(SYS_wait4, -1, scratch, 0, 0), -ECHILD);
	lx_tree_fini(&ptr);
}
END_TEST

struct pt_ender {
	struct lx_proc *c;
	int wstatus;
};

static void *pt_end_later(void *arg)
{
	struct pt_ender *e = arg;

	usleep(50 * 1000);
	lx_proc_ended(e->c, e->wstatus);
	return NULL;
}

/* A wait4 with no child ended yet sleeps until one ends (another thread ends it), and
 * reports a signal's end as such; waitid's WNOWAIT leaves it to be reaped again. */
START_TEST(test_ptree_wait_blocks)
{
	struct lx_thread ct;
	struct pt_ender e;
	siginfo_t *si = gp(scratch + 0xa00, sizeof(siginfo_t));
	pthread_t th;

	ck_assert_int_eq(lx_tree_init(&ptr, pp, 8), 0);
	e = (struct pt_ender){ .c = pt_fork(pp, &ct), .wstatus = SIGKILL };
	ck_assert_int_eq(pthread_create(&th, NULL, pt_end_later, &e), 0);
	ck_assert_int_eq(S6(SYS_waitid, P_PID, e.c->pid, scratch + 0xa00, WEXITED | WNOWAIT, 0, 0), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(si->si_code, CLD_KILLED);
	ck_assert_int_eq(si->si_status, SIGKILL);
	ck_assert_int_eq(S4(SYS_wait4, si->si_pid, scratch, 0, 0), si->si_pid);
	ck_assert_msg(WIFSIGNALED(*(int *)gp(scratch, 4)) && WTERMSIG(*(int *)gp(scratch, 4)) == SIGKILL,
		      "status %#x", *(int *)gp(scratch, 4));
	ck_assert_int_eq(S6(SYS_waitid, P_ALL, 0, scratch + 0xa00, WEXITED, 0, 0), -ECHILD);
	ck_assert_int_eq(S6(SYS_waitid, P_ALL, 0, scratch + 0xa00, WNOHANG, 0, 0), -EINVAL);
	lx_tree_fini(&ptr);
}
END_TEST

/* A child's own children go to the first process when it ends, and are waited for
 * there; a parent that ignores SIGCHLD leaves no zombies; fork stops at the cap. */
START_TEST(test_ptree_orphans_and_limits)
{
	struct lx_thread ct, gt, dt;
	struct lx_proc *c, *g, *d, *x = NULL;
	int cpid, gpid;

	ck_assert_int_eq(lx_tree_init(&ptr, pp, 3), 0);
	c = pt_fork(pp, &ct);
	g = pt_fork(c, &gt);
	cpid = c->pid;
	gpid = g->pid;
	ck_assert_int_eq(psys_on(&gt, SYS_getppid, 0, 0, 0, 0, 0, 0, NULL), cpid);
	ck_assert_int_eq(lx_proc_fork(pp, &x), -EAGAIN); /* 3 processes: the cap */
	lx_proc_ended(c, 0);
	ck_assert_int_eq(psys_on(&gt, SYS_getppid, 0, 0, 0, 0, 0, 0, NULL), pp->pid);
	ck_assert_int_eq(S4(SYS_wait4, cpid, 0, 0, 0), cpid);
	lx_proc_ended(g, 3 << 8);
	ck_assert_int_eq(S4(SYS_wait4, -1, scratch, 0, 0), gpid);
	ck_assert_int_eq(*(int *)gp(scratch, 4), 3 << 8);
	pt_sigaction(SIGCHLD, (uint64_t)(uintptr_t)SIG_IGN, 0);
	d = pt_fork(pp, &dt);
	(void)dt;
	lx_proc_ended(d, 0); /* reaped at once: d is gone */
	ck_assert_int_eq(S4(SYS_wait4, -1, 0, 0, 0), -ECHILD);
	lx_tree_fini(&ptr);
}
END_TEST

/* Process groups and sessions: a child makes its own group and its parent sees it; a
 * group leader cannot start a session, another child can; ids of strangers are ESRCH. */
START_TEST(test_ptree_groups)
{
	struct lx_thread ct, c2t;
	struct lx_proc *c, *c2;

	ck_assert_int_eq(lx_tree_init(&ptr, pp, 8), 0);
	c = pt_fork(pp, &ct);
	c2 = pt_fork(pp, &c2t);
	ck_assert_int_eq(psys_on(&ct, SYS_setpgid, 0, 0, 0, 0, 0, 0, NULL), 0);
	ck_assert_int_eq(S1(SYS_getpgid, c->pid), c->pid);
	ck_assert_int_eq(psys_on(&ct, SYS_setsid, 0, 0, 0, 0, 0, 0, NULL), -EPERM);
	ck_assert_int_eq(psys_on(&c2t, SYS_setsid, 0, 0, 0, 0, 0, 0, NULL), c2->pid);
	ck_assert_int_eq(S1(SYS_getsid, c2->pid), c2->pid);
	ck_assert_int_eq(S1(SYS_getpgid, c2->pid), c2->pid);
	ck_assert_int_eq(S2(SYS_setpgid, c2->pid, pp->pgid), -EPERM); /* another session now */
	ck_assert_int_eq(S2(SYS_setpgid, c->pid, 999999), -EPERM);     /* no such group */
	ck_assert_int_eq(S1(SYS_getpgid, 999999), -ESRCH);
	ck_assert_int_eq(psys_on(&ct, SYS_setpgid, c2->pid, 0, 0, 0, 0, 0, NULL), -ESRCH);
	/* kill: another process of the VM, a group, none */
	ck_assert_int_eq(S2(SYS_kill, c->pid, SIGUSR1), 0);
	ck_assert_uint_ne(c->sigpend.set & (1ULL << (SIGUSR1 - 1)), 0);
	ck_assert_int_eq(S2(SYS_kill, (uint32_t)-c2->pid, SIGUSR2), 0); /* as libc passes it */
	ck_assert_uint_ne(c2->sigpend.set & (1ULL << (SIGUSR2 - 1)), 0);
	ck_assert_uint_eq(c->sigpend.set & (1ULL << (SIGUSR2 - 1)), 0);
	ck_assert_int_eq(S2(SYS_kill, 999999, 0), -ESRCH);
	ck_assert_int_eq(S2(SYS_kill, c->pid, 0), 0);
	lx_proc_destroy(c);
	lx_proc_destroy(c2);
	lx_tree_fini(&ptr);
}
END_TEST

/* ---- execve (exec.c) ---- */

/* Guest string array @strs (NULL-ended) at scratch offset @off, its strings after it. */
static uint64_t gstrv(uint64_t off, const char *const *strs)
{
	uint64_t *v = gp(scratch + off, 8 * 16), at = off + 8 * 16;
	int i = 0;

	for (; strs[i]; i++) {
		v[i] = gstr(at, strs[i]);
		at += strlen(strs[i]) + 1;
	}
	v[i] = 0;
	return scratch + off;
}

/* execve through lx_syscall, with the registers it leaves. */
static int64_t pt_execve(uint64_t path, uint64_t argv, uint64_t envp, struct cpu_regs *out)
{
	struct cpu_regs regs = { .rax = SYS_execve, .rdi = path, .rsi = argv, .rdx = envp };
	struct cpu_segs sregs = { .fs_base = 0x1234 };
	bool dirty = false;

	pt.resume_exact = false;
	lx_syscall(&pt, &regs, &sregs, &dirty);
	if (out)
		*out = regs;
	return (int64_t)regs.rax;
}

/* The argv string @i on a new program's stack at @rsp. */
static const char *pt_stack_arg(uint64_t rsp, int i)
{
	return gp(*(uint64_t *)gp(rsp + 8 * (uint64_t)(1 + i), 8), 1);
}

/* execve replaces the program: the thread starts at the new entry with its stack built
 * from the new argv and envp, close-on-exec descriptors are closed and the others
 * stay, handled signals go back to their default while ignored ones stay ignored,
 * the pid stays and the old mappings are gone. */
START_TEST(test_execve_replaces)
{
	const char *argv[] = { "true", "x1", NULL }, *envp[] = { "B=2", NULL };
	int64_t keep, gone, pid = S0(SYS_getpid);
	uint64_t old_scratch = scratch;
	struct cpu_regs r;

	keep = S4(SYS_openat, AT_FDCWD, gpath(0, "keep"), O_RDWR | O_CREAT, 0600);
	gone = S4(SYS_openat, AT_FDCWD, gpath(0, "gone"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(gone, 0);
	pt_sigaction(SIGUSR1, 0x401000, SA_RESTART);
	pt_sigaction(SIGUSR2, (uint64_t)(uintptr_t)SIG_IGN, 0);
	ck_assert_int_eq(pt_execve(gstr(0x100, "/usr/bin/true"), gstrv(0x200, argv),
				   gstrv(0x600, envp), &r), 0);
	ck_assert_msg(pt.resume_exact && r.rip && r.rsp, "rip %#llx rsp %#llx",
		      (unsigned long long)r.rip, (unsigned long long)r.rsp);
	ck_assert_uint_eq(r.rbx | r.rcx | r.rdi | r.r11, 0);
	ck_assert_uint_eq(*(uint64_t *)gp(r.rsp, 8), 2);
	ck_assert_str_eq(pt_stack_arg(r.rsp, 0), "true");
	ck_assert_str_eq(pt_stack_arg(r.rsp, 1), "x1");
	ck_assert_str_eq(pt_stack_arg(r.rsp, 3), "B=2"); /* envp follows argv's NULL */
	ck_assert_str_eq(pp->exe, "/usr/bin/true");
	ck_assert_uint_eq(pp->clock.data->magic, VDSO_DATA_MAGIC); /* its vDSO tells time */
	ck_assert_int_eq(S0(SYS_getpid), pid);
	ck_assert_int_ge(S2(SYS_fcntl, keep, F_GETFD), 0);
	ck_assert_int_eq(S2(SYS_fcntl, gone, F_GETFD), -EBADF);
	ck_assert_ptr_null(vma_find(&pp->mm.map, old_scratch));
	/* the old scratch area is no mapping now, but still RAM the calls below may use */
	ck_assert_int_eq(S4(SYS_rt_sigaction, SIGUSR1, 0, scratch + 0xf00, 8), 0);
	ck_assert_uint_eq(*(uint64_t *)gp(scratch + 0xf00, 8), (uint64_t)(uintptr_t)SIG_DFL);
	ck_assert_int_eq(S4(SYS_rt_sigaction, SIGUSR2, 0, scratch + 0xf00, 8), 0);
	ck_assert_uint_eq(*(uint64_t *)gp(scratch + 0xf00, 8), (uint64_t)(uintptr_t)SIG_IGN);
}
END_TEST

/* Errors before the point of no return leave the process as it was: a missing file, a
 * file that may not be run, one that is neither ELF nor script, a script whose
 * interpreter is missing, scripts that name each other, a bad argv. A script's
 * interpreter gets its one argument and the script's path in front of the rest. */
START_TEST(test_execve_errors_and_scripts)
{
	const char *argv[] = { "s", "x1", NULL };
	char cmd[8 * PATH_MAX], script[PATH_MAX + 8];
	struct cpu_regs r;

	ck_assert_int_eq(pt_execve(gstr(0x100, "/nonexistent/prog"), 0, 0, NULL), -ENOENT);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && echo x > plain && echo 'no program' > text && "
		 "printf '#!/nonexistent/sh\\n' > lost && printf '#!%s/loop\\n' > loop && "
		 "printf '#!/usr/bin/true  -a b  \\n' > s && printf '#!/usr/bin/true' > nonl && "
		 "chmod +x text lost loop s nonl",
		 pdir, pdir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(pt_execve(gpath(0x100, "plain"), 0, 0, NULL), -EACCES);
	ck_assert_int_eq(pt_execve(gpath(0x100, "text"), 0, 0, NULL), -ENOEXEC);
	ck_assert_int_eq(pt_execve(gpath(0x100, "lost"), 0, 0, NULL), -ENOENT);
	ck_assert_int_eq(pt_execve(gpath(0x100, "loop"), 0, 0, NULL), -ELOOP);
	ck_assert_int_eq(pt_execve(gpath(0x100, "s"), 0x10, 0, NULL), -EFAULT);
	ck_assert_ptr_nonnull(vma_find(&pp->mm.map, scratch)); /* nothing was let go of */
	ck_assert_str_eq(pp->exe, "/usr/bin/true");
	ck_assert_int_eq(pt_execve(gpath(0x100, "s"), gstrv(0x200, argv), 0, &r), 0);
	ck_assert_uint_eq(*(uint64_t *)gp(r.rsp, 8), 4);
	ck_assert_str_eq(pt_stack_arg(r.rsp, 0), "/usr/bin/true");
	ck_assert_str_eq(pt_stack_arg(r.rsp, 1), "-a b");
	snprintf(script, sizeof(script), "%s/s", pdir);
	ck_assert_str_eq(pt_stack_arg(r.rsp, 2), script);
	ck_assert_str_eq(pt_stack_arg(r.rsp, 3), "x1");
	/* a #! line that the file's end ends */
	ck_assert_int_eq(pt_execve(gpath(0x100, "nonl"), gstrv(0x200, argv), 0, &r), 0);
	ck_assert_str_eq(pt_stack_arg(r.rsp, 0), "/usr/bin/true");
}
END_TEST

Suite *personality_suite(void)
{
	Suite *s = suite_create("personality");
	TCase *tc = tcase_create("calls");

	tcase_add_checked_fixture(tc, p_setup, p_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_process_created);
	tcase_add_test(tc, test_paths_cwd_umask);
	tcase_add_test(tc, test_memory_calls);
	tcase_add_test(tc, test_file_calls);
	tcase_add_test(tc, test_shared_calls);
	tcase_add_test(tc, test_pipes_and_epoll);
	tcase_add_test(tc, test_misc_calls);
	tcase_add_test(tc, test_futex_calls);
	tcase_add_test(tc, test_clone_and_exit);
	tcase_add_test(tc, test_close_range);
	tcase_add_test(tc, test_fd_table_own_lock);
	tcase_add_test(tc, test_state_round_trip);
	tcase_add_test(tc, test_signal_off);
	tcase_add_test(tc, test_signal_inherited);
	tcase_add_test(tc, test_timerfd);
	suite_add_tcase(s, tc);

	tc = tcase_create("signals");
	tcase_add_checked_fixture(tc, sig_setup, p_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_signal_frame);
	tcase_add_test(tc, test_signal_queues);
	tcase_add_test(tc, test_signal_dispositions);
	tcase_add_test(tc, test_signal_altstack_and_faults);
	tcase_add_test(tc, test_signal_fpu_refused);
	tcase_add_test(tc, test_signal_threads);
	tcase_add_test(tc, test_signal_broken_pipe);
	tcase_add_test(tc, test_signal_suspend_and_pause);
	tcase_add_test(tc, test_signal_timedwait);
	tcase_add_test(tc, test_signal_itimer_and_alarm);
	tcase_add_test(tc, test_signal_posix_timer);
	tcase_add_test(tc, test_signal_state_round_trip);
	tcase_add_test(tc, test_signal_interrupts_blocking_read);
	tcase_add_test(tc, test_signal_lost_kick);
	tcase_add_test(tc, test_signal_alarm_interrupts_read_and_sleep);
	tcase_add_test(tc, test_signal_ppoll_mask);
	tcase_add_test(tc, test_signal_fault_info);
	tcase_add_test(tc, test_signal_fault_delivery);
	tcase_add_test(tc, test_signalfd_reads_and_polls);
	tcase_add_test(tc, test_signalfd_blocking_read);
	tcase_add_test(tc, test_signalfd_state_round_trip);
	suite_add_tcase(s, tc);

	tc = tcase_create("processes");
	tcase_add_checked_fixture(tc, sig_setup, p_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_ptree_fork_copies);
	tcase_add_test(tc, test_ptree_wait_and_sigchld);
	tcase_add_test(tc, test_ptree_wait_blocks);
	tcase_add_test(tc, test_ptree_orphans_and_limits);
	tcase_add_test(tc, test_ptree_groups);
	tcase_add_test(tc, test_execve_replaces);
	tcase_add_test(tc, test_execve_errors_and_scripts);
	suite_add_tcase(s, tc);
	return s;
}
