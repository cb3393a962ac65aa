/*
 * cpufeat.h - the CPU features a VM's saved state depends on, as an image records
 * them, and whether a host has them (vmm/cpufeat.c).
 */
#ifndef CCVM_CPUFEAT_H
#define CCVM_CPUFEAT_H

#include "../base/x86.h"

#include <stddef.h>
#include <stdint.h>

/* CPUID registers whose feature bits a guest program may have chosen code by (glibc's
 * ifuncs, a JIT): leaf 1 ECX and EDX, leaf 7.0 EBX, ECX and EDX, leaf 0x80000001 ECX
 * and EDX, leaf 0xD.1 EAX (the XSAVE instructions). */
enum cpufeat_word { CF_1_ECX, CF_1_EDX, CF_7_EBX, CF_7_ECX, CF_7_EDX, CF_X1_ECX, CF_X1_EDX,
		    CF_D1_EAX, CF_WORDS };

#define CPUFEAT_COMPONENTS 19 /* XSAVE state components 0..18 */

struct cpufeat {
	uint32_t word[CF_WORDS];        /* as the guest's CPUID table gives them */
	uint64_t xcr0;                  /* XSAVE state components enabled for the guest */
	/* Where each component enabled (2 and up) lies in the standard XSAVE area that
	 * the platform's XSAVE area fills: CPUID 0xD.i EAX (size) and EBX (offset). */
	uint32_t comp_size[CPUFEAT_COMPONENTS], comp_offset[CPUFEAT_COMPONENTS];
};

/* What a guest given the @n leaves of CPUID table @c and XCR0 @xcr0 may depend on. */
void cpufeat_from_cpuid(const struct cpuid_leaf *c, unsigned n, uint64_t xcr0, struct cpufeat *out);

/* The image section (IMG_SEC_CPU): a version, then the fields little-endian. */
#define CPUFEAT_SECTION_LEN (4 + 4 * CF_WORDS + 8 + 8 * CPUFEAT_COMPONENTS)
void cpufeat_encode(const struct cpufeat *f, uint8_t out[CPUFEAT_SECTION_LEN]);
/* 0, or -EINVAL when @len bytes at @in are not a section any ccvm writes (length,
 * version, XCR0 without x87 and SSE or with components beyond CPUFEAT_COMPONENTS, a
 * layout entry for a component not enabled, one outside a 64 KiB XSAVE area). */
int cpufeat_decode(const uint8_t *in, size_t len, struct cpufeat *out);

/* Whether a host whose guests get @host can run state saved with @need: 0, or
 * -ENOTSUP with a message naming the first feature missing (a named CPUID feature, an
 * XSAVE state component, or a component laid out elsewhere). Only features that a
 * program can have chosen code by are compared (the named ones, cpufeat.c). */
int cpufeat_check(const struct cpufeat *need, const struct cpufeat *host, char *msg,
		  size_t len);

#endif
