/*
 * persist_cpu.c - the CPU features an image's saved state may depend on.
 *
 * A guest program chooses code by CPUID (glibc's ifuncs pick AVX2 or AVX-512 string
 * functions once, at start), and its saved XSAVE area holds the state of the
 * components its CPU had. Restored on a host whose guests lack one, it would fault on
 * its first such instruction, or load a register file laid out otherwise. So an image
 * records what the VM's guests were given (vmm/cpufeat.c: the named feature words,
 * XCR0 and the XSAVE layout), and a restore compares that with what this host gives,
 * refusing by name the first feature missing. An image from a ccvm that did not record
 * it is restored as before, unchecked.
 */
#include "persist_cpu.h"

#include "cpufeat.h"
#include "kvm/kvm.h"
#include "../base/log.h"

#include <errno.h>
#include <stdlib.h>

/* What @vm's guests are given. */
static int cpu_of_vm(const struct vm *vm, struct cpufeat *out)
{
	struct cpuid_leaf *leaves = calloc(CPU_TABLE_MAX_LEAVES, sizeof(*leaves));
	uint64_t xcr0;
	unsigned n;

	if (!leaves)
		return -ENOMEM;
	n = kvm_vm_cpuid(vm->kvm, leaves, CPU_TABLE_MAX_LEAVES, &xcr0);
	cpufeat_from_cpuid(leaves, n, xcr0, out);
	free(leaves);
	return 0;
}

int persist_cpu_capture(const struct vm *vm, struct img_writer *img)
{
	uint8_t sec[CPUFEAT_SECTION_LEN];
	struct cpufeat f;
	int rc = cpu_of_vm(vm, &f);

	if (rc)
		return rc;
	cpufeat_encode(&f, sec);
	return img_add_section(img, IMG_SEC_CPU, sec, sizeof(sec));
}

int persist_cpu_check(const struct vm *vm, const void *sec, size_t len, char *err, size_t errlen)
{
	struct cpufeat need, host;
	char why[256];
	int rc;

	if (!sec) {
		log_debug("the image records no CPU features (an older ccvm's): not checked");
		return 0;
	}
	if (cpufeat_decode(sec, len, &need))
		return log_set_err(-EINVAL, err, errlen, "cpu section: not one any ccvm writes");
	rc = cpu_of_vm(vm, &host);
	if (rc)
		return log_set_err(rc, err, errlen, "cpu section: %s", "out of memory");
	rc = cpufeat_check(&need, &host, why, sizeof(why));
	if (rc)
		return log_set_err(rc, err, errlen, "this host's guests lack what the saved guest "
				   "may use: %s", why);
	return 0;
}
