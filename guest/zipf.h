/*
 * zipf.h - zipfbench's workload: Zipf-distributed ranks, the --scatter permutation,
 * what an update writes into a 1 KiB block and the area's checksum. Shared by
 * guest/zipfbench.c, bench/load.c and the QEMU peer's guest (bench/peers/guest), so
 * all three write the same bytes for the same seed.
 *
 * Rejection-inversion (Hoermann and Derflinger, 1996): O(1) per sample without a
 * table, valid for any exponent > 0 including 1. The random state is the caller's
 * (splitmix64), so each writer thread draws its own reproducible sequence.
 * Header-only because zipfbench is a standalone static guest program.
 */
#ifndef CCVM_ZIPF_H
#define CCVM_ZIPF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct zipf {
	uint64_t n;
	double s, h_x1, h_n, shortcut;
};

static inline uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double zipf_uniform(uint64_t *rng)
{
	return (double)(splitmix64(rng) >> 11) * 0x1.0p-53;
}

/* log1p(x)/x and expm1(x)/x, accurate near 0 (where the exponent 1 - s vanishes). */
static inline double zipf_helper1(double x)
{
	return fabs(x) > 1e-8 ? log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

static inline double zipf_helper2(double x)
{
	return fabs(x) > 1e-8 ? expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}

/* H(x): an antiderivative of h(x) = x^-s; and its inverse. */
static inline double zipf_hint(const struct zipf *z, double x)
{
	double lx = log(x);

	return zipf_helper2((1.0 - z->s) * lx) * lx;
}

static inline double zipf_hint_inv(const struct zipf *z, double y)
{
	double t = y * (1.0 - z->s);

	if (t < -1.0)
		t = -1.0;
	return exp(zipf_helper1(t) * y);
}

static inline double zipf_h(const struct zipf *z, double x)
{
	return exp(-z->s * log(x));
}

static inline void zipf_init(struct zipf *z, uint64_t n, double s)
{
	z->n = n;
	z->s = s;
	z->h_x1 = zipf_hint(z, 1.5) - 1.0;
	z->h_n = zipf_hint(z, (double)n + 0.5);
	z->shortcut = 2.0 - zipf_hint_inv(z, zipf_hint(z, 2.5) - zipf_h(z, 2.0));
}

/* A rank in 1..n, P(k) proportional to k^-s. */
static inline uint64_t zipf_sample(const struct zipf *z, uint64_t *rng)
{
	for (;;) {
		double u = z->h_n + zipf_uniform(rng) * (z->h_x1 - z->h_n);
		double x = zipf_hint_inv(z, u);
		uint64_t k = (uint64_t)(x + 0.5);

		if (k < 1)
			k = 1;
		else if (k > z->n)
			k = z->n;
		if ((double)k - x <= z->shortcut ||
		    u >= zipf_hint(z, (double)k + 0.5) - zipf_h(z, (double)k))
			return k;
	}
}

/* --scatter: ranks spread over n blocks by block = (rank * a + b) mod n, with a
 * coprime to n (a fixed bijection drawn from @rng). */
struct zipf_scatter {
	uint64_t n, a, b;
};

static inline uint64_t zipf_gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static inline void zipf_scatter_init(struct zipf_scatter *sc, uint64_t n, uint64_t *rng)
{
	sc->n = n;
	sc->a = (splitmix64(rng) % n) | 1;
	while (zipf_gcd(sc->a, n) != 1)
		sc->a += 2;
	sc->b = splitmix64(rng) % n;
}

static inline uint64_t zipf_scatter(const struct zipf_scatter *sc, uint64_t rank)
{
	return (uint64_t)(((unsigned __int128)rank * sc->a + sc->b) % sc->n);
}

/* Block size of every update, and what one writes: @value spread over the block. */
#define ZIPF_BLOCK_SIZE  1024
#define ZIPF_BLOCK_WORDS (ZIPF_BLOCK_SIZE / 8)

static inline void zipf_block_fill(uint64_t *blk, uint64_t value)
{
	for (int i = 0; i < ZIPF_BLOCK_WORDS; i++)
		blk[i] = value ^ ((uint64_t)i * 0x9E3779B97F4A7C15ULL);
}

static const char *const zipf_words[] = {
	"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
	"juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
	"sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
	"user", "session", "order", "status", "active", "pending", "shipped", "cart",
};
#define ZIPF_NWORDS (sizeof(zipf_words) / sizeof(zipf_words[0]))

/* Records like "id=123456 name=kilo tango status=shipped count=42 ts=1701..." until
 * the block is full: words from a small vocabulary and numbers of varying length,
 * which compress about as well as typical application data. */
static inline void zipf_text_fill(char *blk, uint64_t value)
{
	uint64_t rng = value, ts = 1700000000ULL + value % 100000000ULL;
	size_t at = 0;

	while (at < ZIPF_BLOCK_SIZE) {
		char rec[160];
		uint64_t r = splitmix64(&rng);
		int n = snprintf(rec, sizeof(rec), "id=%llu name=%s %s status=%s count=%llu ts=%llu\n",
				 (unsigned long long)(r % 1000000), zipf_words[(r >> 20) % ZIPF_NWORDS],
				 zipf_words[(r >> 28) % ZIPF_NWORDS], zipf_words[(r >> 36) % ZIPF_NWORDS],
				 (unsigned long long)((r >> 44) % 1000), (unsigned long long)ts++);
		size_t take = (size_t)n < ZIPF_BLOCK_SIZE - at ? (size_t)n : ZIPF_BLOCK_SIZE - at;

		memcpy(blk + at, rec, take);
		at += take;
	}
}

/* The area's checksum zipfbench prints: four FNV-style lanes, folded. */
static inline uint64_t zipf_checksum(const uint64_t *w, uint64_t words)
{
	uint64_t h[4] = { 1, 2, 3, 4 };
	uint64_t i;

	for (i = 0; i + 4 <= words; i += 4)
		for (int l = 0; l < 4; l++)
			h[l] = (h[l] ^ w[i + l]) * 0x100000001B3ULL;
	for (; i < words; i++)
		h[0] = (h[0] ^ w[i]) * 0x100000001B3ULL;
	return h[0] ^ (h[1] << 1) ^ (h[2] << 2) ^ (h[3] << 3);
}

#endif
