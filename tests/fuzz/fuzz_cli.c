/*
 * fuzz_cli.c - libFuzzer target: the command-line value parsers (vmm/cli.c sizes and
 * numbers, vmm/linux/net.c --publish rules), on any string a user may type.
 */
#include "../../vmm/cli.h"
#include "../../vmm/linux/net.h"
#include "../../base/log.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lx_publish rule;
	char err[256], back[128];
	char *s = malloc(size + 1);
	uint64_t bytes;
	double v;

	log_set_level(LOG_ERR);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	(void)cli_parse_size(s, &bytes);
	if (cli_parse_real(s, 0, 1e6, &v) == 0 && !(v >= 0 && v <= 1e6))
		abort(); /* the range promise broken */
	if (lx_net_parse_publish(s, &rule, err, sizeof(err)) == 0)
		(void)lx_net_format_publish(&rule, back, sizeof(back));
	free(s);
	return 0;
}
