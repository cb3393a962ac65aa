/*
 * oci.h - ccvm-oci, the OCI runtime: ccvm reached through runc's command line, so
 * that podman, containerd and Kubernetes run containers in ccvm VMs (cli.c).
 */
#ifndef CCVM_OCI_H
#define CCVM_OCI_H

#include <stdbool.h>

/* Was the program started as ccvm-oci (the last component of @argv0)? */
bool oci_invoked(const char *argv0);
/* ccvm-oci's main: runc's global flags, then one of its commands. The exit status. */
int oci_main(int argc, char **argv);

#endif
