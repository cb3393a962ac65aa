/*
 * gmem.h - guest RAM: one anonymous mapping and checked guest-address translation.
 */
#ifndef CCVM_GMEM_H
#define CCVM_GMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gmem {
	uint8_t *host;    /* 2 MiB aligned start of guest RAM in the monitor */
	uint64_t size;    /* bytes of guest RAM */
	void *map_base;   /* what munmap needs (alignment slack included) */
	size_t map_len;
};

int gmem_map(struct gmem *mem, uint64_t size);
void gmem_unmap(struct gmem *mem);

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

/* Give [gpa, gpa + len) (page aligned) back to the host: it reads as zero again. */
int gmem_discard(struct gmem *mem, uint64_t gpa, uint64_t len);

#endif
