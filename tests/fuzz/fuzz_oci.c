/*
 * fuzz_oci.c - libFuzzer target: an OCI bundle's config.json as podman, containerd or
 * anyone may write it (oci/config.c and its parts), an exec's process file, and a
 * seccomp profile as the personality reads it (vmm/linux/sysfilter.c), with a verdict
 * asked of the result.
 */
#include "../../oci/config.h"
#include "../../vmm/linux/sysfilter.h"
#include "../../base/log.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t args[6] = { 16, 1, 9, 0, 0, 0 };
	struct oci_config c;
	struct lx_filter f;
	char err[512];
	json_t *j;

	log_set_level(LOG_ERR);
	if (size > OCI_MAX_CONFIG_BYTES)
		return 0;
	if (oci_config_parse((const char *)data, size, "/", &c, err, sizeof(err)) == 0) {
		if (!c.n_args || !c.args[0] || c.args[c.n_args])
			abort(); /* args are checked present and NULL-terminated */
		oci_config_free(&c);
	}
	/* the same bytes as an exec's process file */
	if (oci_process_parse((const char *)data, size, &c, err, sizeof(err)) == 0) {
		if (!c.n_args || !c.args[0] || c.args[c.n_args] || !c.cwd || c.cwd[0] != '/')
			abort();
		oci_config_free(&c);
	}
	/* the same bytes as a profile alone */
	j = json_loadb((const char *)data, size, 0, NULL);
	if (j && lx_filter_parse(j, &f, err, sizeof(err)) == 0) {
		for (uint64_t nr = 0; nr < 512; nr += 7)
			if (lx_filter_check(&f, nr, args).act > LX_FA_KILL)
				abort();
		lx_filter_free(&f);
	}
	json_decref(j);
	return 0;
}
