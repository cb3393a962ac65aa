/*
 * mount.h - the container's files, laid out in the monitor's own mount namespace
 * (mount.c).
 */
#ifndef CCVM_OCI_MOUNT_H
#define CCVM_OCI_MOUNT_H

#include "config.h"

#define OCI_MAX_RW 64 /* the monitor's --rw directories at most (vmm/options.h) */

/* The root as the monitor sees it, and the host directories the guest may write
 * under, as ccvm run's --root and --rw take them. */
struct oci_rw {
	char root[PATH_MAX];     /* "": the config's root.path itself */
	char *dirs[OCI_MAX_RW];
	int n;
};

#define OCI_ROOT_MOUNT ".rootfs" /* under ccvm-oci's --root: where each container's root
				  * is bound, in its own mount namespace */

/*
 * oci_mounts_setup - in a mount namespace of this process's own (made here), bind the
 * container's root at @oci_root/.rootfs, the same path for every container (each sees
 * its own there), so that an image records that path and restores under another name
 * or bundle; then lay out what @c asks over it: binds and tmpfs mounts, the six
 * standard devices, the masked paths hidden and the read-only ones made so. Every
 * target is resolved inside the root (symbolic links in the image cannot lead out of
 * it). @rw gets that root, itself among the writable directories when it is writable,
 * and every writable mount.
 *
 * Returns 0, or -errno with @err naming the mount.
 */
int oci_mounts_setup(const struct oci_config *c, const char *oci_root, struct oci_rw *rw,
		     char *err, size_t len);
void oci_rw_free(struct oci_rw *rw);
/* @path (absolute, in the container) opened O_PATH inside the root @root_fd, symbolic
 * links resolved as if @root_fd were "/": the descriptor, or -errno. */
int oci_open_in_root(int root_fd, const char *path, int flags);
/* @path made inside the root, a directory or (@file) an empty file, with its parents
 * (what exists is kept): its O_PATH descriptor, or -errno. */
int oci_make_in_root(int root_fd, const char *path, bool file);

#endif
