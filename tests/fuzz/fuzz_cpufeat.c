/*
 * fuzz_cpufeat.c - libFuzzer target: the CPU features section an image may carry
 * (vmm/cpufeat.c). Whatever decodes must encode back to the same bytes and pass a
 * comparison with itself; anything else is refused, never read past its end.
 */
#include "../../vmm/cpufeat.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t again[CPUFEAT_SECTION_LEN];
	struct cpufeat f;
	char msg[256];

	if (cpufeat_decode(data, size, &f))
		return 0;
	cpufeat_encode(&f, again);
	if (memcmp(again, data, sizeof(again)) != 0 || cpufeat_check(&f, &f, msg, sizeof(msg)))
		abort();
	return 0;
}
