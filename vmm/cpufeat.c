/*
 * cpufeat.c - the CPU features a VM's saved state depends on (issue 16, portability).
 *
 * A guest program reads CPUID once, at start, and picks its code by it: glibc resolves
 * memcpy and strlen to AVX2 or AVX-512 versions, a JIT emits what the CPU has. Its
 * saved registers include the XSAVE area, laid out by the CPU it ran on. Restored on a
 * host without one of those features, the program would die of an invalid opcode
 * long after the restore, or its vector registers would be lost. So an image records
 * the feature bits its guest was given and its XSAVE layout, and restore compares them
 * with what the new host gives a guest, naming the first one missing. Only features
 * that a program can have chosen code by are compared (the table below); bits that
 * describe the platform (x2APIC, the hypervisor bit, OSXSAVE) are not.
 */
#include "cpufeat.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define CF_VERSION 1
#define CF_LEAF_FEATURES 0x1
#define CF_LEAF_EXT7 0x7
#define CF_LEAF_XSAVE 0xD
#define CF_LEAF_EXT1 0x80000001u
#define CF_XSAVE_MAX_AREA (64u << 10) /* no CPU's standard XSAVE area comes close */
#define CF_XCR0_BASE 0x3ULL           /* x87 and SSE: always enabled */

struct cf_name {
	uint8_t word, bit;
	const char *name;
};

static const struct cf_name cf_names[] = {
	{ CF_1_ECX, 0, "sse3" },        { CF_1_ECX, 1, "pclmulqdq" },  { CF_1_ECX, 9, "ssse3" },
	{ CF_1_ECX, 12, "fma" },        { CF_1_ECX, 13, "cx16" },      { CF_1_ECX, 19, "sse4_1" },
	{ CF_1_ECX, 20, "sse4_2" },     { CF_1_ECX, 22, "movbe" },     { CF_1_ECX, 23, "popcnt" },
	{ CF_1_ECX, 25, "aes" },        { CF_1_ECX, 26, "xsave" },     { CF_1_ECX, 28, "avx" },
	{ CF_1_ECX, 29, "f16c" },       { CF_1_ECX, 30, "rdrand" },    { CF_1_EDX, 4, "tsc" },
	{ CF_1_EDX, 8, "cx8" },         { CF_1_EDX, 15, "cmov" },      { CF_1_EDX, 19, "clflush" },
	{ CF_1_EDX, 23, "mmx" },        { CF_1_EDX, 24, "fxsr" },      { CF_1_EDX, 25, "sse" },
	{ CF_1_EDX, 26, "sse2" },       { CF_7_EBX, 0, "fsgsbase" },   { CF_7_EBX, 3, "bmi1" },
	{ CF_7_EBX, 5, "avx2" },        { CF_7_EBX, 8, "bmi2" },       { CF_7_EBX, 9, "erms" },
	{ CF_7_EBX, 16, "avx512f" },    { CF_7_EBX, 17, "avx512dq" },  { CF_7_EBX, 18, "rdseed" },
	{ CF_7_EBX, 19, "adx" },        { CF_7_EBX, 21, "avx512ifma" }, { CF_7_EBX, 23, "clflushopt" },
	{ CF_7_EBX, 24, "clwb" },       { CF_7_EBX, 28, "avx512cd" },  { CF_7_EBX, 29, "sha_ni" },
	{ CF_7_EBX, 30, "avx512bw" },   { CF_7_EBX, 31, "avx512vl" },  { CF_7_ECX, 1, "avx512vbmi" },
	{ CF_7_ECX, 6, "avx512_vbmi2" }, { CF_7_ECX, 8, "gfni" },      { CF_7_ECX, 9, "vaes" },
	{ CF_7_ECX, 10, "vpclmulqdq" }, { CF_7_ECX, 11, "avx512_vnni" },
	{ CF_7_ECX, 12, "avx512_bitalg" }, { CF_7_ECX, 14, "avx512_vpopcntdq" },
	{ CF_7_ECX, 22, "rdpid" },      { CF_7_ECX, 27, "movdiri" },   { CF_7_ECX, 28, "movdir64b" },
	{ CF_7_EDX, 4, "fsrm" },        { CF_7_EDX, 8, "avx512_vp2intersect" },
	{ CF_7_EDX, 14, "serialize" },  { CF_7_EDX, 23, "avx512_fp16" },
	{ CF_X1_ECX, 0, "lahf_lm" },    { CF_X1_ECX, 5, "abm (lzcnt)" }, { CF_X1_ECX, 6, "sse4a" },
	{ CF_X1_ECX, 8, "3dnowprefetch" }, { CF_X1_ECX, 11, "xop" },   { CF_X1_ECX, 16, "fma4" },
	{ CF_X1_ECX, 21, "tbm" },       { CF_X1_EDX, 11, "syscall" },  { CF_X1_EDX, 20, "nx" },
	{ CF_X1_EDX, 26, "pdpe1gb" },   { CF_X1_EDX, 27, "rdtscp" },   { CF_X1_EDX, 29, "lm" },
	{ CF_D1_EAX, 0, "xsaveopt" },   { CF_D1_EAX, 1, "xsavec" },    { CF_D1_EAX, 2, "xgetbv1" },
};

static const char *const cf_components[CPUFEAT_COMPONENTS] = {
	[0] = "x87", [1] = "SSE", [2] = "AVX", [3] = "MPX bounds", [4] = "MPX state",
	[5] = "AVX-512 opmask", [6] = "AVX-512 ZMM_Hi256", [7] = "AVX-512 Hi16_ZMM",
	[8] = "PT", [9] = "PKRU", [11] = "CET user", [12] = "CET supervisor",
	[13] = "HDC", [14] = "UINTR", [15] = "LBR", [16] = "HWP", [17] = "AMX tile config",
	[18] = "AMX tile data",
};

/* Entry (@function, @index) of @c, or NULL. */
static const struct cpuid_leaf *cf_entry(const struct cpuid_leaf *c, unsigned n, uint32_t function,
					 uint32_t index)
{
	for (unsigned i = 0; i < n; i++)
		if (c[i].function == function && c[i].index == index)
			return &c[i];
	return NULL;
}

void cpufeat_from_cpuid(const struct cpuid_leaf *c, unsigned n, uint64_t xcr0, struct cpufeat *out)
{
	const struct cpuid_leaf *e;

	memset(out, 0, sizeof(*out));
	out->xcr0 = xcr0 & ((1ULL << CPUFEAT_COMPONENTS) - 1);
	if ((e = cf_entry(c, n, CF_LEAF_FEATURES, 0))) {
		out->word[CF_1_ECX] = e->ecx;
		out->word[CF_1_EDX] = e->edx;
	}
	if ((e = cf_entry(c, n, CF_LEAF_EXT7, 0))) {
		out->word[CF_7_EBX] = e->ebx;
		out->word[CF_7_ECX] = e->ecx;
		out->word[CF_7_EDX] = e->edx;
	}
	if ((e = cf_entry(c, n, CF_LEAF_EXT1, 0))) {
		out->word[CF_X1_ECX] = e->ecx;
		out->word[CF_X1_EDX] = e->edx;
	}
	if ((e = cf_entry(c, n, CF_LEAF_XSAVE, 1)))
		out->word[CF_D1_EAX] = e->eax;
	for (uint32_t i = 2; i < CPUFEAT_COMPONENTS; i++)
		if ((out->xcr0 >> i & 1) && (e = cf_entry(c, n, CF_LEAF_XSAVE, i))) {
			out->comp_size[i] = e->eax;
			out->comp_offset[i] = e->ebx;
		}
}

static void cf_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t cf_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void cpufeat_encode(const struct cpufeat *f, uint8_t out[CPUFEAT_SECTION_LEN])
{
	uint8_t *p = out;

	cf_put32(p, CF_VERSION);
	p += 4;
	for (int i = 0; i < CF_WORDS; i++, p += 4)
		cf_put32(p, f->word[i]);
	cf_put32(p, (uint32_t)f->xcr0);
	cf_put32(p + 4, (uint32_t)(f->xcr0 >> 32));
	p += 8;
	for (int i = 0; i < CPUFEAT_COMPONENTS; i++, p += 8) {
		cf_put32(p, f->comp_size[i]);
		cf_put32(p + 4, f->comp_offset[i]);
	}
}

int cpufeat_decode(const uint8_t *in, size_t len, struct cpufeat *out)
{
	const uint8_t *p;

	memset(out, 0, sizeof(*out));
	if (len != CPUFEAT_SECTION_LEN || cf_get32(in) != CF_VERSION)
		return -EINVAL;
	p = in + 4;
	for (int i = 0; i < CF_WORDS; i++, p += 4)
		out->word[i] = cf_get32(p);
	out->xcr0 = (uint64_t)cf_get32(p) | (uint64_t)cf_get32(p + 4) << 32;
	p += 8;
	if ((out->xcr0 & CF_XCR0_BASE) != CF_XCR0_BASE || out->xcr0 >> CPUFEAT_COMPONENTS)
		return -EINVAL;
	for (int i = 0; i < CPUFEAT_COMPONENTS; i++, p += 8) {
		bool on = i >= 2 && (out->xcr0 >> i & 1);

		out->comp_size[i] = cf_get32(p);
		out->comp_offset[i] = cf_get32(p + 4);
		if (!on && (out->comp_size[i] || out->comp_offset[i]))
			return -EINVAL;
		if ((uint64_t)out->comp_offset[i] + out->comp_size[i] > CF_XSAVE_MAX_AREA)
			return -EINVAL;
	}
	return 0;
}

static const char *cf_component_name(int i)
{
	return cf_components[i] ? cf_components[i] : "unnamed";
}

/* The XSAVE state components and their layout: 0, or -ENOTSUP with a message. */
static int cf_check_xsave(const struct cpufeat *need, const struct cpufeat *host, char *msg,
			  size_t len)
{
	for (int i = 0; i < CPUFEAT_COMPONENTS; i++) {
		if (!(need->xcr0 >> i & 1))
			continue;
		if (!(host->xcr0 >> i & 1)) {
			snprintf(msg, len, "XSAVE state component %d (%s) is not available here: "
				 "the saved FPU and vector registers need it", i, cf_component_name(i));
			return -ENOTSUP;
		}
		if (need->comp_size[i] != host->comp_size[i] ||
		    need->comp_offset[i] != host->comp_offset[i]) {
			snprintf(msg, len, "XSAVE state component %d (%s) lies at offset %u, size %u "
				 "here, at offset %u, size %u in the image", i, cf_component_name(i),
				 host->comp_offset[i], host->comp_size[i], need->comp_offset[i],
				 need->comp_size[i]);
			return -ENOTSUP;
		}
	}
	return 0;
}

int cpufeat_check(const struct cpufeat *need, const struct cpufeat *host, char *msg,
		  size_t len)
{
	for (size_t i = 0; i < sizeof(cf_names) / sizeof(cf_names[0]); i++) {
		uint32_t bit = 1u << cf_names[i].bit;

		if ((need->word[cf_names[i].word] & bit) && !(host->word[cf_names[i].word] & bit)) {
			snprintf(msg, len, "the CPU feature %s is not available here: the saved "
				 "program may use it", cf_names[i].name);
			return -ENOTSUP;
		}
	}
	return cf_check_xsave(need, host, msg, len);
}
