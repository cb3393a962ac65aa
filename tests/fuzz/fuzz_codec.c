/*
 * fuzz_codec.c - libFuzzer target: decompression of a chunk's frame (snapshot/codec.c)
 * on any bytes. An image's checksums are no defence (anyone can write matching ones),
 * so a frame reaches the decompressor as an attacker wrote it: the first byte picks the
 * codec, the rest is the frame, and the output must be exactly one chunk or an error.
 */
#include "../../snapshot/codec.h"
#include "../../snapshot/image.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t chunk[IMG_CHUNK];

	if (size < 1)
		return 0;
	(void)codec_decompress((enum img_codec)(data[0] % IMG_CODEC_NR), data + 1, size - 1, chunk,
			       IMG_CHUNK);
	return 0;
}
