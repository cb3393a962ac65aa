/*
 * config_impl.h - what config.c shares with its parts: the typed readers of JSON
 * fields (cfgfield.c), each of which names the field when it refuses, and the readers
 * of linux.* (config_linux.c) and mounts (config_mount.c).
 */
#ifndef CCVM_OCI_CONFIG_IMPL_H
#define CCVM_OCI_CONFIG_IMPL_H

#include "config.h"

/* "FIELD: why" into @err; returns -EINVAL. */
int cfg_refuse(char *err, size_t len, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A JSON string without NUL, at most OCI_MAX_STR bytes, copied; 0 or -EINVAL/-ENOMEM. */
int cfg_string(json_t *v, const char *field, char **out, char *err, size_t len);
/* An array of such strings, NULL-terminated; an absent field is an empty list. */
int cfg_strings(json_t *v, const char *field, char ***out, size_t *n, char *err, size_t len);
/* An absolute path, no "..", copied. */
int cfg_abs_path(json_t *v, const char *field, char **out, char *err, size_t len);
int cfg_bool(json_t *v, const char *field, bool *out, char *err, size_t len);
/* An integer in [lo, hi]. */
int cfg_int(json_t *v, const char *field, int64_t lo, int64_t hi, int64_t *out, char *err,
	    size_t len);
/* @key of @obj must be absent, null, or empty: what ccvm cannot honour. */
int cfg_absent(json_t *obj, const char *key, const char *field, const char *why, char *err,
	       size_t len);
void cfg_strings_free(char **v);
/* Fields of @obj (named PREFIX.KEY) that must be absent, each with why; the table ends
 * with a NULL key. */
struct cfg_refusal {
	const char *key, *why;
};
int cfg_refused(json_t *obj, const char *prefix, const struct cfg_refusal *table, char *err,
		size_t len);

/* linux.* (config_linux.c) and mounts (config_mount.c). */
int cfg_linux(json_t *lnx, struct oci_config *c, char *err, size_t len);
int cfg_mounts(json_t *mounts, struct oci_config *c, char *err, size_t len);
void cfg_mounts_free(struct oci_config *c);

#endif
