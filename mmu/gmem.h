/*
 * gmem.h - guest RAM: one anonymous mapping and checked guest-address translation.
 */
#ifndef CCVM_GMEM_H
#define CCVM_GMEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GMEM_HELD_MAX 8
#define GMEM_SPAN_RANGES 4

/* The guest ranges one system call took pointers to (lx_uptr), so that a call still
 * waiting in a host call when a pre-copy starts is taken as writing them whenever it
 * returns. Past GMEM_SPAN_RANGES, the last range grows to cover the new one. */
struct gmem_span {
	uint64_t gpa[GMEM_SPAN_RANGES], end[GMEM_SPAN_RANGES];
	int n;
	bool listed;
	struct gmem_span *next, *prev; /* on the gmem's waiting list */
};

/* How a process's view of guest memory (docs/processes.md) keeps blocks it shares with
 * other processes apart: mmu/aspace.c's, for gmem_view. */
struct gmem_cow {
	/* Make [gva, gva + len) the view's own, so the monitor may write it in place:
	 * 0, -EFAULT, or -ENOMEM past a memory budget (mmu/aspace.h). */
	int (*own)(void *ctx, uint64_t gva, uint64_t len);
	/* [gva, gva + len) is about to read as zero (gmem_discard): what others read of it
	 * stays theirs, and nothing is charged or copied that the discard drops whole.
	 * 0, -EFAULT or -ENOMEM. */
	int (*drop)(void *ctx, uint64_t gva, uint64_t len);
	/* Where the bytes at @gva are now, for reading: an address in the view's root,
	 * valid to the end of @gva's 2 MiB block; -1 when not user memory. */
	int64_t (*where)(void *ctx, uint64_t gva);
	/* True while the view shares nothing and has all its memory: the above are then
	 * the identity, and are not called (no lock on a system call's way). */
	bool (*alone)(void *ctx);
	void *ctx;
};

struct gmem {
	uint8_t *host;    /* 2 MiB aligned start of guest RAM in the monitor (a view's window) */
	uint64_t size;    /* bytes of guest RAM (a view's: of its window) */
	/* A process's view: the guest memory whose window [base, base + size) it is, and
	 * how it shares blocks. The marks, held ranges and waiting calls are the root's;
	 * a view's own fields for them are unused. NULL/0/NULL in guest memory itself. */
	struct gmem *root;
	uint64_t base;
	const struct gmem_cow *cow;
	void *map_base;   /* what munmap needs (alignment slack included) */
	size_t map_len;
	/* While a pre-copy runs (snapshot/precopy.c): a bit per page the monitor may have
	 * written since it started, for KVM's dirty log sees only the guest's writes. Set
	 * and read atomically; NULL otherwise. */
	uint64_t *written;
	uint64_t written_pages;   /* pages it has bits for (from guest-physical 0) */
	/* Ranges the monitor keeps a pointer into and writes whenever it likes (the vDSO
	 * clock page, the fastio ring): taken as written at every mark. */
	struct {
		uint64_t gpa, len;
	} held[GMEM_HELD_MAX];
	int n_held;
	pthread_mutex_t lock;     /* the marks' start against the waiting list */
	struct gmem_span *waiting; /* calls waiting in a host call, with their ranges */
};

int gmem_map(struct gmem *mem, uint64_t size);
/* Room for @n windows of @window bytes each (docs/processes.md): gmem_map's checks
 * for a window, @n at most GMEM_MAX_WINDOWS. Host address space only: nothing is
 * backed until written. */
#define GMEM_MAX_WINDOWS 64
int gmem_map_windows(struct gmem *mem, uint64_t window, int n);
void gmem_unmap(struct gmem *mem);
/* @view becomes a process's view of @root: guest addresses [0, @size) of it are
 * @root's [@base, @base + @size), shared blocks kept apart by @cow (NULL: none). Every
 * gmem_ function below takes a view where it takes guest memory; gpa arguments are
 * then the view's addresses. Nothing to free. */
void gmem_view(struct gmem *view, struct gmem *root, uint64_t base, uint64_t size,
	       const struct gmem_cow *cow);

/* True when the view shares blocks with another process's (docs/processes.md). */
bool gmem_is_shared(const struct gmem *mem);

/* Host pointer for guest-physical [gpa, gpa + len), any part of RAM, or NULL. */
void *gmem_sys_ptr(const struct gmem *mem, uint64_t gpa, uint64_t len);

/*
 * Host pointer for guest *user* memory [gva, gva + len): the only translation for
 * addresses that come from the guest. Used in place only by the bulk paths, which
 * never take a decision on what they read there twice: read/write/send/recv payloads
 * and iovec buffers (the host kernel moves the bytes), results written in place by the
 * host kernel (stat, statfs, epoll_wait events, getdents) or once by the monitor
 * (uname, sysinfo, times), futex words and robust-list entries (atomics, each read
 * once), the fastio ring (each record header read once), the program, vDSO and stack
 * at load time, and the snapshot engine's page copies. Everything else goes through
 * the copy-in and copy-out helpers below. NULL when any byte lies outside user RAM (the
 * system area included) or the range wraps.
 */
void *gmem_user_ptr(const struct gmem *mem, uint64_t gva, uint64_t len);

/* gmem_user_ptr for a pointer the monitor keeps and writes through at any time (see
 * struct gmem's held). */
void *gmem_user_ptr_held(struct gmem *mem, uint64_t gva, uint64_t len);

/* From now on, every page a translation or a discard hands out is set in @bits (a bit
 * per page, which the caller cleared), and so are the held ranges; until
 * gmem_mark_stop. Translations handed out before are not seen: the caller pauses the
 * writers once after this call, so that none is still in use. */
void gmem_mark_start(struct gmem *mem, uint64_t *bits);
void gmem_mark_stop(struct gmem *mem);
/* Set the held ranges' pages in the marks again (a pre-copy's last look). */
void gmem_mark_held(const struct gmem *mem);

/* [@gva, @gva + @len) of @mem was handed to the call @s stands for. */
void gmem_span_add(const struct gmem *mem, struct gmem_span *s, uint64_t gva, uint64_t len);
/* The call of @s waits in a host call that may write its ranges at any time, and no
 * longer does: while on the list, a mark's start takes its ranges as written. */
void gmem_wait_begin(struct gmem *mem, struct gmem_span *s);
void gmem_wait_end(struct gmem *mem, struct gmem_span *s);

/* Bit i of @bits (cleared first) set for each @block-sized piece i of [@from, @from +
 * @len) of guest memory @mem that a call waiting in a host call may write
 * (gmem_wait_begin). */
void gmem_waiting_blocks(struct gmem *mem, uint64_t from, uint64_t len, uint64_t block,
			 uint64_t *bits);

/* True when [gva, gva + len) is inside user RAM. */
bool gmem_user_range_ok(const struct gmem *mem, uint64_t gva, uint64_t len);

/*
 * Copy-in and copy-out: the way the monitor reads guest structures, strings and
 * lengths. Guest RAM is shared with vCPUs that keep running during a system call, so a
 * value read twice from it may differ the second time; the monitor reads each guest
 * value once into its own memory and uses only that copy. 0 or -EFAULT (any byte
 * outside user RAM).
 */
int gmem_copy_in(const struct gmem *mem, void *dst, uint64_t gva, uint64_t len);
int gmem_copy_out(const struct gmem *mem, uint64_t gva, const void *src, uint64_t len);

/*
 * A NUL-terminated guest string of at most @max bytes (NUL included) copied into @dst
 * (room for @max bytes), each byte read once. Returns 0 with *@len = strlen,
 * -ENAMETOOLONG when no NUL comes within @max bytes, -EFAULT when the string runs off
 * user RAM first.
 */
int gmem_copy_str(const struct gmem *mem, char *dst, uint64_t gva, size_t max, size_t *len);

/* Put [gpa, gpa + len) back together into huge pages where small ones split them
 * (write-protecting or filling single pages does): the guest runs faster with fewer
 * TLB misses. Best effort: kernels before 6.1 and non-THP hosts leave it as it is. */
void gmem_collapse(struct gmem *mem, uint64_t gpa, uint64_t len);

/* Fault [gpa, gpa + len) (page aligned) in for writing, its bytes unchanged: a
 * migration's destination does it before the pages come, so that the first touch
 * (slow here: ~10 us a page for fresh huge pages in our nested VMs) paces no round.
 * 0, -EINVAL outside the RAM, -errno (-ENOMEM). */
int gmem_populate(struct gmem *mem, uint64_t gpa, uint64_t len);

/* Give [gpa, gpa + len) (page aligned) back to the host: it reads as zero again. */
int gmem_discard(struct gmem *mem, uint64_t gpa, uint64_t len);

/*
 * Shared mappings (docs/processes.md): [gpa, gpa + len) (page aligned) of @mem's
 * window becomes host file @fd from @off on, so every window that maps the file holds
 * the same bytes, for the guest through KVM and for the monitor in place. The caller
 * keeps the file at least as long as the range (a page past its end would fault the
 * monitor). gmem_unalias makes the range private zero memory again. A view's shared
 * blocks are made its own first. 0, -EINVAL or -errno from mmap.
 */
int gmem_alias(struct gmem *mem, uint64_t gpa, uint64_t len, int fd, uint64_t off);
int gmem_unalias(struct gmem *mem, uint64_t gpa, uint64_t len);

#endif
