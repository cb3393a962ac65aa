/*
 * persist_restore.h - rebuild a VM from a snapshot image; check an image.
 */
#ifndef CCVM_RESTORE_H
#define CCVM_RESTORE_H

#include "persist_tree.h"

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <stdio.h>

struct vm;
struct lx_hooks;
struct lx_net;
struct tls_creds;

struct restore_opts {
	uint64_t mem;               /* guest RAM size asked by the user, 0 for the image's */
	uint64_t mem_total;         /* --mem-total; 0: vm_create's default */
	bool lazy;
	int vcpus;                  /* thread cap; 0: the default (raised to the saved count) */
	int max_procs;              /* process cap (--max-procs) */
	unsigned peer_timeout_s;    /* --incoming: the source's silence allowed, seconds */
	const struct tls_creds *tls;/* --incoming --tls-creds, read; NULL: no TLS */
	const char *tls_authz;      /* --tls-authz: the sources accepted; NULL: any */
	/* Confinement and network policy: the restoring command line's, never the image's
	 * (struct lx_restore_policy). */
	const char *root;
	const char *const *rw;
	int n_rw;
	const struct lx_net *net;   /* --net host and --publish rules given */
	bool publish_given;         /* else the saved loopback rules are reused */
	const struct lx_hooks *hooks;
	const struct lx_filter *filter; /* --seccomp-profile; NULL: none */
	/* Called once the image is open and the VM made, before memory is loaded or any
	 * thread started: the monitor confines itself (vmm/confine.c). 0 to go on. */
	int (*confine)(void *ctx);
	void *confine_ctx;
};

/*
 * restore_vm - create a VM from the image at @file, with its memory, vCPU registers
 * and process state, ready to run. Every memory chunk and section is verified: all of
 * them before the VM runs (eager), or each on first touch with a background prefetch
 * (lazy; see lazy.c). Every saved thread gets its vCPU back.
 * Errors are reported to the user. Returns 0 or -errno.
 */
int restore_vm(const char *file, const struct restore_opts *o, struct vm *vm, uint64_t *mono_ns);

/* After a lazy restore: a thread that waits for the memory to be in place, then lets
 * snapshots proceed. restore_lazy_end stops loading early if needed and joins it. */
int restore_lazy_begin(struct vm *vm);
void restore_lazy_end(struct vm *vm);

/* Print what the image holds and verify every checksum and that its vCPU and process
 * state are what ccvm itself could have saved. Returns 0 when intact, 1 when damaged
 * or unreadable (reported on stderr). */
int inspect_image(const char *file, FILE *out);

/* The state sections of an open image checked as restore uses them (kvm_saved_check,
 * lx_state_check), without a VM: 0, or -EINVAL with the section, field and why in
 * @err. */
struct img_reader;
int restore_check_state(const struct img_reader *r, char *err, size_t errlen);

/* The state sections read once into memory and checked there: what restore loads,
 * and nothing read again from the file. */
struct kvm_saved;
struct restore_saved {
	struct kvm_saved *vcpus; /* n_vcpus records of kvm_saved_size() bytes */
	size_t n_vcpus;
	json_t *proc;
	json_t *tree;            /* the other processes (persist_tree.c), or NULL */
	struct tree_windows windows; /* and their memory: in place in an image */
	uint8_t *windows_buf;    /* or whole, a stream's (what windows.data is) */
	/* The shared memory section (vmm/linux/shm.c): left in an image, read a MiB at a
	 * time (.read set), or a stream's, its memfds made as it came (lx_shm_in_end's
	 * registry, freed with the rest). */
	struct lx_shm_src shm_file;
	json_t *shm_made;
	void *cpu;               /* the CPU features section (persist_cpu.c); NULL: none */
	size_t cpu_len;
};

/* Read and check @r's state into @st (free it with restore_saved_free): 0, or -EINVAL
 * with the section, field and why in @err (@st then empty). */
int restore_read_state(const struct img_reader *r, struct restore_saved *st, char *err,
		       size_t errlen);
void restore_saved_free(struct restore_saved *st);

/* Where state sections come from: an image, or a migration stream
 * (persist_incoming.c). @section gives a malloc'd copy of section @type (NULL for an
 * empty one) and its length: 0, -ENOENT when there is none, -EIO. */
struct restore_src {
	int (*section)(void *ctx, uint32_t type, void **data, size_t *len);
	/* Where it can (an image), section @type left in place (its length, and @read
	 * for what tree_windows reads at @off): 0, -ENOENT; NULL: sections come whole. */
	int (*in_place)(void *ctx, uint32_t type, size_t *len,
			int (**read)(void *ctx, uint64_t off, void *buf, size_t n));
	void *ctx;
	uint64_t ram_size;
};
int restore_read_sections(const struct restore_src *src, struct restore_saved *st, char *err,
			  size_t errlen);

/* The steps of restore_vm for memory that comes from elsewhere: the VM made with @o's
 * caps and the monitor confined (0 or -errno); then, memory in place, the state @st
 * rebuilt under @o's policy (errors reported, naming @what). */
int restore_vm_create(struct vm *vm, uint64_t ram_size, const struct restore_opts *o);
int restore_vm_state(const char *what, const struct restore_saved *st,
		     const struct restore_opts *o, struct vm *vm, uint64_t *mono_ns);


#endif
