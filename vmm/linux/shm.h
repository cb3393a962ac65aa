/*
 * shm.h - memory shared between processes (shm.c): memfds and MAP_SHARED mappings.
 */
#ifndef CCVM_LX_SHM_H
#define CCVM_LX_SHM_H

#include "lx.h"

/*
 * Shared mappings (shm.c). lx_shm_lock orders shared mappings against truncations of
 * the memfds behind them, for the whole VM: taken before any process's lock.
 * lx_shm_anon: a memfd of ccvm's own of @len bytes for MAP_SHARED | MAP_ANONYMOUS (a
 * host fd, or -errno). lx_shm_alias: [start, end) of @p's memory becomes @host's bytes
 * from @off on, as far as the file goes (p->lock held). lx_shm_drop: the shared
 * mappings in [start, end) become private zero memory again, before they leave the map
 * (p->lock held). lx_shm_map_all: every shared mapping of @p's map made (a fork's
 * child, a restored process). lx_shm_may_truncate: 0, or -EBUSY when a process maps
 * memfd @host past @len. 0 or -errno.
 */
void lx_shm_lock(void);
void lx_shm_unlock(void);
bool lx_shm_is_memfd(int host);
int lx_shm_anon(uint64_t len);
int lx_shm_alias(struct lx_proc *p, uint64_t start, uint64_t end, int host, uint64_t off);
int lx_shm_drop(struct lx_proc *p, uint64_t start, uint64_t end);
int lx_shm_map_all(struct lx_proc *p);
int lx_shm_may_truncate(struct lx_proc *p, int host, uint64_t len);
/* The inode of memfd @host into *@ino: true, or false when it is not a memfd. */
bool lx_shm_memfd_ino(int host, uint64_t *ino);

#endif
