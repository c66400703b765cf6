/*
 * rand.c — the random numbers libtir draws: one stream generator
 * (xorshift64*, Vigna 2016: 64 bits of state, fast, good enough for
 * sampling schedules and choosing candidates) and one mixing function
 * (splitmix64's finalizer) that turns a seed and indices into independent
 * seeds and fills measurement inputs.  Every draw of the tuner — a sketch's
 * sampled tiles, a mutation, a batch's picks, the random cost model, the
 * inputs a candidate is checked on — goes through these, so a seed fixes
 * everything and nothing depends on a libc generator or a global.
 */
#include "ir.h"

#define GOLDEN 0x9E3779B97F4A7C15ull      /* 2^64 / the golden ratio */

uint64_t tir_rand(uint64_t *state)
{
	uint64_t x = *state ? *state : GOLDEN;  /* xorshift's one fixed point */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1Dull;
}

double tir_rand_unit(uint64_t *state)
{
	return (double)(tir_rand(state) >> 11) * 0x1p-53;
}

uint64_t tir_splitmix(uint64_t *state)
{
	uint64_t z = (*state += GOLDEN);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t tir_derive(uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t z = seed ^ (a * 0xD1B54A32D192ED03ull) ^ (b * 0x8CB92BA72F3D8DD7ull);
	return tir_splitmix(&z);
}
