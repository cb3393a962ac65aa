/*
 * cfgfield.c - typed readers of config.json's fields.
 *
 * Each reads one JSON value of the hostile config, checks its type, bounds and form,
 * copies it into monitor memory, and when it refuses names the field it was given
 * ("process.user.uid: ..."). config.c and its parts read every field through these.
 */
#include "config_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cfg_refuse(char *err, size_t len, const char *field, const char *fmt, ...)
{
	size_t n;
	va_list ap;

	n = (size_t)snprintf(err, len, "config.json: %s: ", field);
	if (n >= len)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(err + n, len - n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int cfg_string(json_t *v, const char *field, char **out, char *err, size_t len)
{
	if (!json_is_string(v))
		return cfg_refuse(err, len, field, "expected a string");
	if (json_string_length(v) > OCI_MAX_STR || strlen(json_string_value(v)) != json_string_length(v))
		return cfg_refuse(err, len, field, "longer than %d bytes, or holds a NUL", OCI_MAX_STR);
	*out = strdup(json_string_value(v));
	return *out ? 0 : -ENOMEM;
}

void cfg_strings_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

int cfg_strings(json_t *v, const char *field, char ***out, size_t *n, char *err, size_t len)
{
	char name[96];
	size_t count = json_is_array(v) ? json_array_size(v) : 0;
	char **list;

	*out = NULL;
	*n = 0;
	if (v && !json_is_null(v) && !json_is_array(v))
		return cfg_refuse(err, len, field, "expected an array of strings");
	if (count > OCI_MAX_LIST)
		return cfg_refuse(err, len, field, "more than %d entries", OCI_MAX_LIST);
	list = calloc(count + 1, sizeof(*list));
	if (!list)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "%s[%zu]", field, i);
		int rc = cfg_string(json_array_get(v, i), name, &list[i], err, len);

		if (rc) {
			cfg_strings_free(list);
			return rc;
		}
	}
	*out = list;
	*n = count;
	return 0;
}

/* Does @p hold a ".." component? */
static bool cfg_dotdot(const char *p)
{
	for (const char *s = p; (s = strstr(s, "..")); s += 2)
		if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
			return true;
	return false;
}

int cfg_abs_path(json_t *v, const char *field, char **out, char *err, size_t len)
{
	int rc = cfg_string(v, field, out, err, len);

	if (rc)
		return rc;
	if ((*out)[0] != '/' || cfg_dotdot(*out)) {
		rc = cfg_refuse(err, len, field, "'%s' is not an absolute path without '..'", *out);
		free(*out);
		*out = NULL;
	}
	return rc;
}

int cfg_bool(json_t *v, const char *field, bool *out, char *err, size_t len)
{
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return cfg_refuse(err, len, field, "expected true or false");
	*out = json_is_true(v);
	return 0;
}

int cfg_int(json_t *v, const char *field, int64_t lo, int64_t hi, int64_t *out, char *err,
	    size_t len)
{
	json_int_t x;

	if (!json_is_integer(v))
		return cfg_refuse(err, len, field, "expected an integer");
	x = json_integer_value(v);
	if (x < lo || x > hi)
		return cfg_refuse(err, len, field, "%lld is outside %lld..%lld", (long long)x,
				  (long long)lo, (long long)hi);
	*out = x;
	return 0;
}

int cfg_absent(json_t *obj, const char *key, const char *field, const char *why, char *err,
	       size_t len)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v) || json_is_false(v))
		return 0;
	if ((json_is_array(v) && json_array_size(v) == 0) ||
	    (json_is_object(v) && json_object_size(v) == 0) || (json_is_integer(v) && !json_integer_value(v)))
		return 0;
	return cfg_refuse(err, len, field, "%s", why);
}

int cfg_refused(json_t *obj, const char *prefix, const struct cfg_refusal *table, char *err,
		size_t len)
{
	char field[96];
	int rc;

	for (const struct cfg_refusal *r = table; r->key; r++) {
		snprintf(field, sizeof(field), "%s.%s", prefix, r->key);
		if ((rc = cfg_absent(obj, r->key, field, r->why, err, len)))
			return rc;
	}
	return 0;
}
