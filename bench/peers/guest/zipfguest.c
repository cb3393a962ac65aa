/*
 * zipfguest.c - zipfbench's update loop as a bare-metal guest, for QEMU as a peer.
 *
 * QEMU's background-snapshot must run the same workload as a ccvm guest to be
 * compared with it, and QEMU cannot run a Linux program without a Linux kernel, whose
 * kernel mode is slow under our nested KVM. So this guest is zipfbench and almost
 * nothing else: boot.S sets up long mode, zg_main reads the options from the multiboot
 * command line (QEMU's -append), and the loop runs at CPL3 with the same 1 KiB blocks,
 * area size, Zipf exponent, --scatter permutation and seed as guest/zipfbench.c, from
 * the same sampler (guest/zipf.h), so with the same seed it writes the same blocks in
 * the same order.
 *
 * Progress goes out through QEMU's debug console port (0xe9, -debugcon): 'R' when the
 * area is filled and updates start, then '.' after every chunk= updates. Each byte is
 * an exit to QEMU, so chunk= keeps them rare; the driver (bench/peers/peers.py)
 * timestamps the bytes as they arrive and rebuilds the throughput timeline from them.
 * A bad option or an area that does not fit prints a message there and exits QEMU
 * through isa-debug-exit (port 0xf4) with a nonzero status.
 *
 * Options (key=value, separated by spaces): size= (bytes, K/M/G suffixes; default
 * 256M), alpha= (default 1.0), scatter= (0 or 1), seed= (default 1), chunk= (updates per
 * progress byte, default 65536), updates= (stop after that many, print
 * "checksum=HEX" as zipfbench's summary does for --write-total updates * 1K, and exit
 * QEMU with status 1; default 0: run until QEMU is stopped). Math comes from musl's
 * libc.a, which needs no operating system for it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "zipf.h"

#define BLOCK_SIZE      ZIPF_BLOCK_SIZE
#define BLOCK_WORDS     ZIPF_BLOCK_WORDS
#define MIB             (1ULL << 20)
#define AREA_BASE       (4 * MIB)        /* above the image, 2 MiB aligned */
#define MAPPED_TOP      (4096 * MIB)     /* boot.S maps the first 4 GiB */
#define PORT_CONSOLE    0xe9             /* QEMU -debugcon */
#define PORT_EXIT       0xf4             /* QEMU -device isa-debug-exit */
#define MARK_READY      'R'
#define MARK_CHUNK      '.'
#define SEL_UDATA       0x1b             /* boot.S's GDT, RPL 3 */
#define SEL_UCODE       0x23
#define RFLAGS_USER     0x3002           /* IOPL 3 (the progress port), IF off */
#define MB_INFO_MEM     (1u << 0)
#define MB_INFO_CMDLINE (1u << 2)
#define USER_STACK      65536
#define MSR_FS_BASE     0xC0000100
#define TCB_SIZE        4096

/* The part of the multiboot information we read. */
struct mb_info {
	uint32_t flags, mem_lower, mem_upper, boot_device, cmdline;
};

struct zg_args {
	uint64_t size, seed, chunk, updates;
	double alpha;
	int scatter;
};

static struct zg_args zg_args = { .size = 256 * MIB, .seed = 1, .chunk = 65536, .alpha = 1.0 };
static uint8_t zg_user_stack[USER_STACK] __attribute__((aligned(16)));
/* A thread control block for musl: strtod sets errno on bad input, found through
 * %fs:0, which the x86-64 TLS ABI says points to itself. */
static uint64_t zg_tcb[TCB_SIZE / 8] __attribute__((aligned(64)));

void zg_main(uint32_t mb_addr);

static void zg_out(uint8_t byte)
{
	__asm__ volatile("outb %0, %1" : : "a"(byte), "Nd"((uint16_t)PORT_CONSOLE));
}

static void zg_puts(const char *s)
{
	while (*s)
		zg_out((uint8_t)*s++);
}

static void zg_put_hex(uint64_t v)
{
	for (int shift = 60; shift >= 0; shift -= 4)
		zg_out((uint8_t)"0123456789abcdef"[(v >> shift) & 15]);
}

/* Leave QEMU with status (@code << 1) | 1, as isa-debug-exit defines it. Works at
 * CPL3 too: user mode runs with IOPL 3. */
static void __attribute__((noreturn)) zg_exit(uint32_t code)
{
	__asm__ volatile("outl %0, %1" : : "a"(code), "Nd"((uint16_t)PORT_EXIT));
	for (;;)
		;
}

/* Print why, then exit with status 3. */
static void __attribute__((noreturn)) zg_fail(const char *why)
{
	zg_puts("zipfguest: ");
	zg_puts(why);
	zg_out('\n');
	zg_exit(1);
}

/* The benchmark, at CPL3: zipfbench's sequence for the same seed; it ends only by
 * leaving QEMU (updates=), or when QEMU is stopped. */
static void __attribute__((noreturn)) zg_user_main(void)
{
	struct zipf z;
	struct zipf_scatter perm = { .n = 1, .a = 1, .b = 0 };
	uint64_t rng = zg_args.seed, nblocks = zg_args.size / BLOCK_SIZE;
	uint64_t *mem = (uint64_t *)AREA_BASE;
	uint64_t last = zg_args.updates ? zg_args.updates : UINT64_MAX;
	uint64_t to_mark = zg_args.chunk; /* a countdown: no division per update */

	if (zg_args.scatter)
		zipf_scatter_init(&perm, nblocks, &rng);
	for (uint64_t b = 0; b < nblocks; b++)
		zipf_block_fill(mem + b * BLOCK_WORDS, b);
	zipf_init(&z, nblocks, zg_args.alpha);
	zg_out(MARK_READY);
	for (uint64_t n = 1; n <= last; n++) {
		uint64_t rank = zipf_sample(&z, &rng) - 1;
		uint64_t block = zg_args.scatter ? zipf_scatter(&perm, rank) : rank;

		zipf_block_fill(mem + block * BLOCK_WORDS, splitmix64(&rng));
		if (--to_mark == 0) {
			zg_out(MARK_CHUNK);
			to_mark = zg_args.chunk;
		}
	}
	zg_puts("\nchecksum=");
	zg_put_hex(zipf_checksum(mem, nblocks * BLOCK_WORDS));
	zg_exit(0);
}

static int zg_parse_size(const char *s, const char **end, uint64_t *out)
{
	char *e;
	uint64_t v = strtoull(s, &e, 10);

	if (e == s)
		return -1;
	switch (*e) {
	case 'k': case 'K': v <<= 10; e++; break;
	case 'm': case 'M': v <<= 20; e++; break;
	case 'g': case 'G': v <<= 30; e++; break;
	default: break;
	}
	*end = e;
	*out = v;
	return 0;
}

static int zg_key(const char *p, const char *key, const char **val)
{
	while (*key && *p == *key)
		p++, key++;
	if (*key || *p != '=')
		return 0;
	*val = p + 1;
	return 1;
}

/* One key=value word at @p; unknown words (QEMU puts the kernel's file name first)
 * are skipped. Returns where the word ends, or NULL for a bad value. */
static const char *zg_parse_word(const char *p)
{
	const char *v, *end = p;
	char *e;

	if (zg_key(p, "size", &v)) {
		if (zg_parse_size(v, &end, &zg_args.size))
			return NULL;
	} else if (zg_key(p, "alpha", &v)) {
		zg_args.alpha = strtod(v, &e);
		end = e;
		if (e == v || !(zg_args.alpha > 0))
			return NULL;
	} else if (zg_key(p, "scatter", &v)) {
		zg_args.scatter = (int)strtoul(v, &e, 10);
		end = e;
		if (e == v || zg_args.scatter > 1)
			return NULL;
	} else if (zg_key(p, "seed", &v)) {
		zg_args.seed = strtoull(v, &e, 0);
		end = e;
	} else if (zg_key(p, "updates", &v)) {
		zg_args.updates = strtoull(v, &e, 10);
		end = e;
		if (e == v)
			return NULL;
	} else if (zg_key(p, "chunk", &v)) {
		zg_args.chunk = strtoull(v, &e, 10);
		end = e;
		if (e == v || !zg_args.chunk)
			return NULL;
	} else {
		while (*end && *end != ' ')
			end++;
	}
	return *end == ' ' || !*end ? end : NULL;
}

static void zg_parse_cmdline(const char *p)
{
	while (*p) {
		if (*p == ' ') {
			p++;
			continue;
		}
		p = zg_parse_word(p);
		if (!p)
			zg_fail("bad option (size=, alpha=, scatter=0|1, seed=, chunk=)");
	}
}

/* What zg_main keeps of the multiboot information for the CPL3 side. */
static uint32_t zg_mb_flags, zg_mb_mem_upper, zg_mb_cmdline;

/* At CPL3, first thing: the x87 and SSE state, then the options and the checks. On our
 * KVM hosts guest kernel mode is emulated one instruction at a time, and KVM's
 * emulator has no x87 (fild: "KVM internal error. Suberror: 1"), so nothing that may
 * touch the FPU (strtod, the Zipf sampler's math) runs before the drop to CPL3. */
static void __attribute__((noreturn)) zg_user_start(void)
{
	uint64_t ram_top;

	__asm__ volatile("fninit");
	if (!(zg_mb_flags & MB_INFO_MEM))
		zg_fail("the loader gave no memory size");
	if (zg_mb_flags & MB_INFO_CMDLINE)
		zg_parse_cmdline((const char *)(uintptr_t)zg_mb_cmdline);
	ram_top = MIB + (uint64_t)zg_mb_mem_upper * 1024;
	if (ram_top > MAPPED_TOP)
		ram_top = MAPPED_TOP;
	if (zg_args.size < BLOCK_SIZE || AREA_BASE + zg_args.size > ram_top)
		zg_fail("size= does not fit in guest RAM above 4 MiB (give QEMU more -m)");
	zg_user_main();
}

/* Entered from boot.S at CPL0 with the multiboot information's address: only integer
 * moves, the TLS base (a wrmsr) and the drop to CPL3 (see zg_user_start). */
void zg_main(uint32_t mb_addr)
{
	const volatile struct mb_info *mb = (const volatile struct mb_info *)(uintptr_t)mb_addr;
	/* As if called: the ABI wants rsp + 8 aligned to 16 at a function's entry. */
	uint64_t stack_top = (uint64_t)(uintptr_t)(zg_user_stack + USER_STACK) - 8;

	zg_mb_flags = mb->flags;
	zg_mb_mem_upper = mb->mem_upper;
	zg_mb_cmdline = mb->cmdline;
	zg_tcb[0] = (uint64_t)(uintptr_t)zg_tcb;
	__asm__ volatile("wrmsr" : : "c"(MSR_FS_BASE), "a"((uint32_t)(uintptr_t)zg_tcb),
			 "d"((uint32_t)((uint64_t)(uintptr_t)zg_tcb >> 32)));
	__asm__ volatile("pushq %[ds]\n\t"
			 "pushq %[sp]\n\t"
			 "pushq %[fl]\n\t"
			 "pushq %[cs]\n\t"
			 "pushq %[ip]\n\t"
			 "iretq"
			 :
			 : [ds] "i"(SEL_UDATA), [sp] "r"(stack_top), [fl] "i"(RFLAGS_USER),
			   [cs] "i"(SEL_UCODE), [ip] "r"((uint64_t)(uintptr_t)zg_user_start)
			 : "memory");
	__builtin_unreachable();
}
