/*
 * mount.h - the container's files, laid out in the monitor's own mount namespace
 * (mount.c).
 */
#ifndef CCVM_OCI_MOUNT_H
#define CCVM_OCI_MOUNT_H

#include "config.h"

#define OCI_MAX_RW 64 /* the monitor's --rw directories at most (vmm/options.h) */

/* The host directories the guest may write under, as ccvm run's --rw takes them. */
struct oci_rw {
	char *dirs[OCI_MAX_RW];
	int n;
};

/*
 * oci_mounts_setup - in a mount namespace of this process's own (made here), lay out
 * what @c asks over its root: binds and tmpfs mounts, the six standard devices, the
 * masked paths hidden and the read-only ones made so. Every target is resolved inside
 * the root (symbolic links in the image cannot lead out of it). @rw gets the root when
 * it is writable and every writable mount.
 *
 * Returns 0, or -errno with @err naming the mount.
 */
int oci_mounts_setup(const struct oci_config *c, struct oci_rw *rw, char *err, size_t len);
void oci_rw_free(struct oci_rw *rw);
/* @path (absolute, in the container) opened O_PATH inside the root @root_fd, symbolic
 * links resolved as if @root_fd were "/": the descriptor, or -errno. */
int oci_open_in_root(int root_fd, const char *path, int flags);
/* @path made inside the root, a directory or (@file) an empty file, with its parents
 * (what exists is kept): its O_PATH descriptor, or -errno. */
int oci_make_in_root(int root_fd, const char *path, bool file);

#endif
