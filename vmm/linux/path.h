/*
 * path.h - the guest's paths (path.c): confined to its root, writable only under --rw.
 */
#ifndef CCVM_LX_PATH_H
#define CCVM_LX_PATH_H

#include "call.h"

/* Paths (path.c): confined to the guest root, writable only under --rw dirs. */
int lx_fs_init(struct lx_fs *fs, const char *root, const char *const *rw, int n_rw);
void lx_fs_fini(struct lx_fs *fs);
/* fork's copy: the same root, writable directories, working directory and umask. 0 or
 * -errno (@dst then holds what lx_fs_fini frees). */
int lx_fs_copy(struct lx_fs *dst, struct lx_fs *src);
/* The working directory (a guest path) copied out, and set (-ENAMETOOLONG past
 * PATH_MAX); the umask, and set (returning the old one): under fs->lock. */
void lx_fs_cwd(struct lx_fs *fs, char out[PATH_MAX]);
int lx_fs_set_cwd(struct lx_fs *fs, const char *gpath);
mode_t lx_fs_umask(struct lx_fs *fs);
mode_t lx_fs_set_umask(struct lx_fs *fs, mode_t m);
int lx_path_join(struct lx_proc *p, int dirfd, const char *path, char out[PATH_MAX]);
/* Open a guest path: checked on an O_PATH descriptor first, then opened for real, never
 * as a controlling tty. @c: the calling system call (a FIFO waits for its peer inside
 * its blocking bracket), or NULL outside a call (FIFOs then never wait). */
int lx_fs_open(struct lx_call *c, struct lx_fs *fs, const char *gpath, int flags, mode_t mode,
	       int *host_fd);
int lx_fs_open_path(struct lx_fs *fs, const char *gpath, bool follow, int *host_fd);
int lx_fs_parent(struct lx_fs *fs, const char *gpath, bool for_write, int *parent_fd,
		 char base[NAME_MAX + 1]);
int lx_fs_guest_path(struct lx_fs *fs, int host_fd, char out[PATH_MAX]);
/* May the guest write to what @host_fd is (harmless devices included)? Is it under
 * an --rw directory (what changing its metadata needs)? */
bool lx_fs_writable(struct lx_fs *fs, int host_fd);
bool lx_fs_in_rw(struct lx_fs *fs, int host_fd);
/* Is what @host_fd is exactly one of the host paths @paths (canonical)? */
bool lx_fs_is_one_of(int host_fd, const char *const *paths, int n);

#endif
