/*
 * codec-bench.c - how well and how fast each codec compresses memory, per block size.
 *
 * The image format compresses each chunk as one frame; this measures what a block
 * size, codec and level give on a dataset, one thread, no disk: the bytes of data
 * (zero pages are holes in an image and are left out), the bytes the frames take
 * (a block that does not shrink by a page is counted raw, as the writer stores it),
 * and compression and decompression speed in MB of data per second of one core.
 *
 *   codec-bench --file DUMP | --data zipf|text [--mem SIZE]
 *               [--codec zstd|lz4] [--level N] [--block SIZE] [--repeat N]
 *
 * Prints one JSON line per run. bench/storage/run.py runs it over the datasets.
 */
#include "load.h"
#include "../base/mono.h"
#include "../snapshot/codec.h"
#include "../snapshot/image.h"
#include "../vmm/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CB_EXIT_USAGE 2

struct cb_opts {
	const char *file;
	enum load_data data;
	uint64_t mem, block;
	enum img_codec codec;
	int level, repeat;
};

static int cb_usage(void)
{
	fprintf(stderr, "usage: codec-bench --file DUMP | --data zipf|text [--mem SIZE]\n"
			"                   [--codec zstd|lz4] [--level N] [--block SIZE] [--repeat N]\n");
	return CB_EXIT_USAGE;
}

/* The dataset: a file's bytes (whole pages), or memory filled as bench/load.c does. */
static uint8_t *cb_load(const struct cb_opts *o, uint64_t *len)
{
	uint8_t *buf;

	if (o->file) {
		FILE *f = fopen(o->file, "rb");
		long n;

		if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0) {
			if (f)
				fclose(f);
			return NULL;
		}
		*len = (uint64_t)n / o->block * o->block;
		buf = aligned_alloc(PAGE_SIZE, *len ? *len : PAGE_SIZE);
		rewind(f);
		if (buf && fread(buf, 1, *len, f) != *len) {
			free(buf);
			buf = NULL;
		}
		fclose(f);
		return buf;
	}
	*len = o->mem / o->block * o->block;
	buf = aligned_alloc(PAGE_SIZE, *len);
	for (uint64_t b = 0; buf && b < *len / LOAD_BLOCK; b++)
		load_block_fill(&(struct load_opts){ .data = o->data },
				(uint64_t *)(void *)(buf + b * LOAD_BLOCK), b, b * 2654435761ULL);
	return buf;
}

static uint64_t cb_data_pages(const uint8_t *p, uint64_t len)
{
	uint64_t n = 0;

	for (uint64_t off = 0; off < len; off += PAGE_SIZE)
		n += !img_page_is_zero(p + off);
	return n;
}

static int cb_run(const struct cb_opts *o)
{
	uint64_t len, data = 0, stored = 0, frames = 0;
	uint8_t *buf = cb_load(o, &len), *out = malloc(codec_bound(o->block)), *back = malloc(o->block);
	double t_comp = 0, t_dec = 0;

	if (!buf || !out || !back || !len) {
		fprintf(stderr, "codec-bench: cannot load the dataset\n");
		return 1;
	}
	for (uint64_t off = 0; off < len; off += o->block) {
		uint64_t pages = cb_data_pages(buf + off, o->block);
		ssize_t n = 0;
		double t0 = mono_s();

		if (!pages)
			continue;
		for (int r = 0; r < o->repeat; r++)
			n = codec_compress(o->codec, o->level, buf + off, o->block, out, codec_bound(o->block));
		t_comp += mono_s() - t0;
		data += pages * PAGE_SIZE;
		if (n <= 0 || ((uint64_t)n + PAGE_SIZE - 1) / PAGE_SIZE >= pages) {
			stored += pages * PAGE_SIZE; /* stored raw */
			continue;
		}
		stored += (uint64_t)n;
		frames++;
		t0 = mono_s();
		for (int r = 0; r < o->repeat; r++)
			if (codec_decompress(o->codec, out, (size_t)n, back, o->block) ||
			    memcmp(back, buf + off, o->block)) {
				fprintf(stderr, "codec-bench: block at %llu does not round-trip\n",
					(unsigned long long)off);
				return 1;
			}
		t_dec += mono_s() - t0;
	}
	printf("{\"dataset\":\"%s\",\"codec\":\"%s\",\"level\":%d,\"block\":%llu,\"bytes\":%llu,"
	       "\"bytes_data\":%llu,\"bytes_stored\":%llu,\"frames\":%llu,\"ratio\":%.4f,"
	       "\"ratio_total\":%.4f,\"compress_mb_per_s\":%.1f,\"decompress_mb_per_s\":%.1f}\n",
	       o->file ? o->file : o->data == LOAD_DATA_TEXT ? "text" : "zipf", codec_name(o->codec),
	       o->level, (unsigned long long)o->block, (unsigned long long)len,
	       (unsigned long long)data, (unsigned long long)stored, (unsigned long long)frames,
	       stored ? (double)data / (double)stored : 0, stored ? (double)len / (double)stored : 0,
	       t_comp > 0 ? (double)data * o->repeat / 1e6 / t_comp : 0,
	       t_dec > 0 ? (double)data * o->repeat / 1e6 / t_dec : 0);
	free(buf);
	free(out);
	free(back);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "file", 1, 0, 'f' }, { "data", 1, 0, 'd' },  { "mem", 1, 0, 'm' },
		{ "codec", 1, 0, 'c' }, { "level", 1, 0, 'l' }, { "block", 1, 0, 'b' },
		{ "repeat", 1, 0, 'r' }, { 0, 0, 0, 0 },
	};
	struct cb_opts o = { .mem = 256ULL << 20, .block = IMG_CHUNK, .codec = IMG_CODEC_ZSTD,
			     .repeat = 1 };
	double d;
	int c;

	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (c) {
		case 'f': o.file = optarg; break;
		case 'd':
			if (strcmp(optarg, "zipf") && strcmp(optarg, "text"))
				return cb_usage();
			o.data = strcmp(optarg, "text") == 0 ? LOAD_DATA_TEXT : LOAD_DATA_ZIPF;
			break;
		case 'm': if (cli_parse_size(optarg, &o.mem)) return cb_usage(); break;
		case 'b':
			if (cli_parse_size(optarg, &o.block) || o.block % PAGE_SIZE || !o.block ||
			    o.block > IMG_CHUNK)
				return cb_usage();
			break;
		case 'c': if (codec_parse(optarg, &o.codec) || o.codec == IMG_CODEC_NONE) return cb_usage(); break;
		case 'l': if (cli_parse_real(optarg, -7, 19, &d) || d != (int)d) return cb_usage(); o.level = (int)d; break;
		case 'r': if (cli_parse_real(optarg, 1, 1000, &d) || d != (int)d) return cb_usage(); o.repeat = (int)d; break;
		default: return cb_usage();
		}
	}
	if (!o.level)
		o.level = codec_default_level(o.codec);
	if (codec_level_check(o.codec, o.level) || optind < argc)
		return cb_usage();
	return cb_run(&o);
}
