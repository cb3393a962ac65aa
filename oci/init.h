/*
 * init.h - the container's process: set up, wait for start, become the monitor
 * (init.c), and the ccvm run command line it becomes (runargs.c).
 */
#ifndef CCVM_OCI_INIT_H
#define CCVM_OCI_INIT_H

#include "config.h"
#include "mount.h"

struct oci_init {
	const struct oci_config *c;
	const char *oci_root;       /* ROOT: --root */
	const char *state_dir;      /* ROOT/ID: the start FIFO and the control socket */
	const char *console_socket; /* --console-socket; NULL: none */
	bool systemd_cgroup;        /* --systemd-cgroup */
	bool debug;                 /* --debug: the monitor says more */
	int ready_fd;               /* what create reads: an error, or end of file once set up */
	const char *image;          /* restore: the checkpoint image, run at once; NULL: create */
};

/*
 * oci_init_run - in the process create forked: join the cgroup and the namespaces,
 * lay out the mounts, hand a terminal to the console socket, tell create it is set up
 * (closing @in->ready_fd), wait on the start FIFO, then exec ccvm run, which runs the
 * container's program in a VM and exits with its status. For restore (@in->image),
 * no wait: ccvm restore of the image at once.
 *
 * Returns only on failure: an exit status, after writing why to ready_fd (or to
 * stderr once create has gone).
 */
int oci_init_run(const struct oci_init *in);

/* process.terminal (init.c): a pseudo-terminal whose master goes to console socket
 * @sock (SCM_RIGHTS, its name as the message, as runc sends it) and whose slave
 * becomes the calling process's controlling terminal and fds 0, 1 and 2; the caller
 * leads a session of its own. 0 or -errno with @err. */
int oci_terminal(const char *sock, char *err, size_t len);

/* ccvm run's arguments for @c (NULL-terminated, in @out, to free with oci_argv_free):
 * root and writable directories, the control socket and seccomp profile in
 * @state_dir, memory, limits, network, user, the io.ccvm.* options, then the program;
 * or, with @image non-NULL, ccvm restore's for that checkpoint image, lazily. 0, -ENOMEM, or -EINVAL with @err. */
int oci_run_argv(const struct oci_config *c, const struct oci_rw *rw, const char *state_dir,
		 const char *image, bool debug, char ***out, char *err, size_t len);
void oci_argv_free(char **argv);

#endif
