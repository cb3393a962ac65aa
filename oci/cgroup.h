/*
 * cgroup.h - the container's cgroup, joined by the monitor (cgroup.c).
 */
#ifndef CCVM_OCI_CGROUP_H
#define CCVM_OCI_CGROUP_H

#include "config.h"

/*
 * oci_cgroup_join - make linux.cgroupsPath in every cgroup hierarchy (v1 and v2, as
 * cgroupfs lays them out), give it the limits the config sets, and move this process
 * into it, so that the monitor and every thread it starts later are bounded by the
 * container's limits. @systemd: --systemd-cgroup was given.
 *
 * Returns 0 (nothing to do without a cgroupsPath), or -errno with @err saying why.
 */
int oci_cgroup_join(const struct oci_config *c, bool systemd, char *err, size_t len);
/* The cgroup @path removed from every hierarchy (empty by now); errors are ignored:
 * what is left is reported at debug level. */
void oci_cgroup_remove(const char *path);
/* Whether @path is systemd's slice:prefix:name form. */
bool oci_cgroup_is_systemd(const char *path);

#endif
