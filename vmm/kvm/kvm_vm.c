/*
 * kvm_vm.c - a KVM VM over one RAM mapping, its CPUID table, and its dirty log.
 *
 * One memory slot covers all guest RAM at guest-physical 0. ccvm needs KVM's sync
 * registers (a system call returns without extra ioctls) and immediate exit (a kick
 * that lands just before an entry is not lost); a KVM without them is refused with
 * its name. Guests see KVM's supported CPUID table with XSAVE limited to what a CPL3
 * program may enable (XCR0_GUEST_MASK).
 */
#include "kvm_impl.h"
#include "../../base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define KVM_API_VERSION_EXPECTED 12
#define CPUID_MAX_ENTRIES CPU_TABLE_MAX_LEAVES
#define CPUID_LEAF_XSAVE 0xD
/* State components the guest may enable: x87, SSE, AVX and the three AVX-512 ones.
 * Not AMX (needs per-process permission) nor PKRU (needs CR4.PKE). */
#define XCR0_GUEST_MASK                                                                \
	(XCR0_X87 | XCR0_SSE | XCR0_AVX | XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM)
#define XCR0_AVX512 (XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM)
#define RAM_SLOT 0
/* kvm_vm_forget's slot: far above every window's (slot = window, fewer than 64) and at
 * a guest-physical address no window reaches (64 windows of LAYOUT_MAX_RAM < 2^45). */
#define FORGET_SLOT 4000
#define FORGET_GPA (1ULL << 46)

static int kvm_check_caps(struct kvm_vm *k)
{
	int sync = ioctl(k->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_SYNC_REGS);

	if ((sync & (KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS)) !=
	    (KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS)) {
		log_err("this KVM lacks KVM_CAP_SYNC_REGS, which ccvm needs to return from "
			"system calls without extra ioctls");
		return -ENOTSUP;
	}
	if (ioctl(k->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) <= 0) {
		log_err("this KVM lacks KVM_CAP_IMMEDIATE_EXIT");
		return -ENOTSUP;
	}
	return 0;
}

static int kvm_open(struct kvm_vm *k)
{
	k->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (k->kvm_fd < 0) {
		int rc = -errno;

		log_err("cannot open /dev/kvm: %s (is KVM available, and may this user open it? "
			"try running as root)", strerror(errno));
		return rc;
	}
	if (ioctl(k->kvm_fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION_EXPECTED) {
		log_err("unexpected KVM API version");
		return -ENOTSUP;
	}
	return kvm_check_caps(k);
}

/* The guest's XCR0, from CPUID leaf 0xD.0. */
static void kvm_guest_xcr0(struct kvm_vm *k)
{
	const struct kvm_cpuid2 *c = k->cpuid;

	k->xcr0 = XCR0_X87 | XCR0_SSE;
	for (unsigned i = 0; i < c->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &c->entries[i];

		if (e->function == CPUID_LEAF_XSAVE && e->index == 0)
			k->xcr0 = ((uint64_t)e->edx << 32 | e->eax) & XCR0_GUEST_MASK;
	}
	/* AVX-512 state is all or nothing. */
	if ((k->xcr0 & XCR0_AVX512) != XCR0_AVX512)
		k->xcr0 &= ~XCR0_AVX512;
}

unsigned kvm_vm_cpuid(const struct kvm_vm *k, struct cpuid_leaf *out, unsigned max, uint64_t *xcr0)
{
	unsigned n = 0;

	for (unsigned i = 0; i < k->cpuid->nent && n < max; i++, n++) {
		const struct kvm_cpuid_entry2 *e = &k->cpuid->entries[i];

		out[n] = (struct cpuid_leaf){ .function = e->function, .index = e->index,
					      .eax = e->eax, .ebx = e->ebx, .ecx = e->ecx,
					      .edx = e->edx };
	}
	*xcr0 = k->xcr0;
	return n;
}

static int kvm_get_cpuid(struct kvm_vm *k)
{
	struct kvm_cpuid2 *c;

	c = calloc(1, sizeof(*c) + CPUID_MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2));
	if (!c)
		return -ENOMEM;
	c->nent = CPUID_MAX_ENTRIES;
	if (ioctl(k->kvm_fd, KVM_GET_SUPPORTED_CPUID, c) < 0) {
		int rc = -errno;

		log_err("KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
		free(c);
		return rc;
	}
	k->cpuid = c;
	kvm_guest_xcr0(k);
	return 0;
}

static int kvm_set_slot(struct kvm_vm *k, uint32_t flags)
{
	struct kvm_userspace_memory_region region = {
		.slot = RAM_SLOT, .flags = flags, .guest_phys_addr = 0, .memory_size = k->size,
		.userspace_addr = (uint64_t)(uintptr_t)k->ram,
	};

	return ioctl(k->fd, KVM_SET_USER_MEMORY_REGION, &region) < 0 ? -errno : 0;
}

static int kvm_vm_build(struct kvm_vm *k)
{
	int rc = kvm_open(k);

	if (rc)
		return rc;
	k->fd = ioctl(k->kvm_fd, KVM_CREATE_VM, 0);
	if (k->fd < 0) {
		rc = -errno;
		log_err("KVM_CREATE_VM: %s", strerror(errno));
		return rc;
	}
	k->run_size = ioctl(k->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (k->run_size <= 0)
		return -EIO;
	rc = kvm_get_cpuid(k);
	if (rc)
		return rc;
	rc = kvm_set_slot(k, 0);
	if (rc)
		log_err("KVM_SET_USER_MEMORY_REGION (%llu MiB): %s",
			(unsigned long long)(k->size >> 20), strerror(-rc));
	return rc;
}

int kvm_vm_create(uint8_t *ram, uint64_t size, struct kvm_vm **out)
{
	struct kvm_vm *k = calloc(1, sizeof(*k));
	int rc;

	if (!k)
		return -ENOMEM;
	*k = (struct kvm_vm){ .kvm_fd = -1, .fd = -1, .ram = ram, .size = size };
	rc = kvm_vm_build(k);
	if (rc) {
		kvm_vm_destroy(k);
		return rc;
	}
	*out = k;
	return 0;
}

void kvm_vm_destroy(struct kvm_vm *k)
{
	if (!k)
		return;
	if (k->fd >= 0)
		close(k->fd);
	if (k->kvm_fd >= 0)
		close(k->kvm_fd);
	free(k->cpuid);
	free(k);
}

int kvm_dirty_manual(struct kvm_vm *k)
{
	struct kvm_enable_cap cap = { .cap = KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
				      .args[0] = KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE |
						 KVM_DIRTY_LOG_INITIALLY_SET };

	return ioctl(k->fd, KVM_ENABLE_CAP, &cap) < 0 ? -errno : 0;
}

/* Logging is switched by registering the slot again with or without the flag. */
int kvm_dirty_logging(struct kvm_vm *k, bool on)
{
	return kvm_set_slot(k, on ? KVM_MEM_LOG_DIRTY_PAGES : 0);
}

int kvm_dirty_clear(struct kvm_vm *k, uint64_t *pages)
{
	struct kvm_clear_dirty_log log = { .slot = RAM_SLOT, .first_page = 0,
					   .num_pages = (uint32_t)(k->size / PAGE_SIZE),
					   .dirty_bitmap = pages };

	return ioctl(k->fd, KVM_CLEAR_DIRTY_LOG, &log) < 0 ? -errno : 0;
}

int kvm_dirty_get(struct kvm_vm *k, uint64_t *bitmap)
{
	struct kvm_dirty_log log = { .slot = RAM_SLOT, .dirty_bitmap = bitmap };

	return ioctl(k->fd, KVM_GET_DIRTY_LOG, &log) < 0 ? -errno : 0;
}

int kvm_vm_window(struct kvm_vm *k, int slot, uint64_t gpa, uint8_t *host, uint64_t size)
{
	struct kvm_userspace_memory_region region = {
		.slot = (uint32_t)slot, .guest_phys_addr = gpa, .memory_size = size,
		.userspace_addr = (uint64_t)(uintptr_t)host,
	};

	if (slot <= RAM_SLOT)
		return -EINVAL;
	return ioctl(k->fd, KVM_SET_USER_MEMORY_REGION, &region) < 0 ? -errno : 0;
}

int kvm_vm_forget(struct kvm_vm *k)
{
	/* Never read by the guest: any page-aligned host memory will do. */
	static uint8_t page[PAGE_SIZE] __attribute__((aligned(PAGE_SIZE)));
	struct kvm_userspace_memory_region region = {
		.slot = FORGET_SLOT, .guest_phys_addr = FORGET_GPA, .memory_size = sizeof(page),
		.userspace_addr = (uint64_t)(uintptr_t)page,
	};

	if (ioctl(k->fd, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		return -errno;
	region.memory_size = 0; /* the deletion is what makes KVM drop its shadow pages */
	return ioctl(k->fd, KVM_SET_USER_MEMORY_REGION, &region) < 0 ? -errno : 0;
}
