/*
 * fixture.c - images checked in compressed (tests/unit/data), unpacked for a test.
 */
#include "suites.h"
#include "../../snapshot/codec.h"

#include <stdint.h>
#include <stdlib.h>

void fixture_unpack(const char *zst, size_t size, const char *to)
{
	static uint8_t in[1 << 20];
	uint8_t *out = malloc(size);
	size_t n;
	FILE *f = fopen(zst, "rb");

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(out);
	n = fread(in, 1, sizeof(in), f);
	fclose(f);
	ck_assert_uint_lt(n, sizeof(in)); /* read whole */
	ck_assert_int_eq(codec_decompress(IMG_CODEC_ZSTD, in, n, out, size), 0);
	f = fopen(to, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(out, 1, size, f), size);
	fclose(f);
	free(out);
}
