/*
 * cmd.h - ccvm-oci's commands and what they share (flags.c, cmd_*.c).
 */
#ifndef CCVM_OCI_CMD_H
#define CCVM_OCI_CMD_H

#include "state.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The flags before the command, as runc takes them. */
struct oci_global {
	const char *root;     /* --root (default /run/ccvm-oci) */
	bool debug;           /* --debug */
	bool systemd_cgroup;  /* --systemd-cgroup */
};

/* One flag of a command: --NAME VALUE, --NAME=VALUE or, runc's Go flags, -NAME. A
 * flag without a value sets *@on; one with a value sets *@val. A repeated flag keeps
 * the last value. */
struct oci_flag {
	const char *name;
	const char *alias;    /* a short form ("f"), or NULL */
	const char **val;
	bool *on;
};

#define OCI_MAX_POS 8

/*
 * oci_flags_parse - @argv (the command's own, after its name) into @flags and the
 * positional arguments, in order, in @pos. Returns how many positional arguments, or
 * -EINVAL with the flag named in a message logged.
 */
int oci_flags_parse(const char *cmd, int argc, char **argv, const struct oci_flag *flags,
		    const char **pos);

/* The flags at the start of @argv, up to the first word that is none (runc's global
 * flags, before the command): its index, or -EINVAL. */
int oci_flags_prefix(const char *cmd, int argc, char **argv, const struct oci_flag *flags);

/* A container's record, with "does not exist" said the way runc says it. 0 or 1. */
int oci_load(const struct oci_global *g, const char *id, struct oci_state *st);
/* SIGKILL to a container's monitor, then wait until it has ended (a zombie counts):
 * 0, or 1 said. */
int oci_kill_wait(struct oci_state *st);
/* @n bytes of @text into @path whole: a temporary name beside it, fsync, rename (a
 * reader never sees half of it). 0 or -errno. */
int oci_write_file(const char *path, const char *text, size_t n, mode_t mode);
/* The record and the whole directory of a container that is gone. */
void oci_remove(struct oci_state *st);

/* What create and restore take. */
struct oci_create_args {
	const char *bundle, *pid_file, *console, *preserve;
	bool no_pivot, no_keyring;
	const char *image;          /* restore: the checkpoint's image; NULL: create */
};

/* A container made from @a's bundle: checked, recorded, its process left behind
 * (waiting for start, or for restore already restoring @a->image), its pid in @pid.
 * 0, or 1 with everything undone and the reason said. */
int oci_create_from(const struct oci_global *g, const char *id, const struct oci_create_args *a,
		    pid_t *pid);

int oci_cmd_create(const struct oci_global *g, int argc, char **argv);
int oci_cmd_start(const struct oci_global *g, int argc, char **argv);
int oci_cmd_state(const struct oci_global *g, int argc, char **argv);
int oci_cmd_kill(const struct oci_global *g, int argc, char **argv);
int oci_cmd_delete(const struct oci_global *g, int argc, char **argv);
int oci_cmd_pause(const struct oci_global *g, int argc, char **argv);
int oci_cmd_resume(const struct oci_global *g, int argc, char **argv);
int oci_cmd_list(const struct oci_global *g, int argc, char **argv);
int oci_cmd_ps(const struct oci_global *g, int argc, char **argv);
int oci_cmd_features(const struct oci_global *g, int argc, char **argv);
int oci_cmd_checkpoint(const struct oci_global *g, int argc, char **argv);
int oci_cmd_restore(const struct oci_global *g, int argc, char **argv);
int oci_cmd_exec(const struct oci_global *g, int argc, char **argv);

#endif
