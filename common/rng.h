/* Dropout's counter-based random numbers: a pure function of the seed, the
 * training step, the op's site, the loop indices around it and the element,
 * so a recomputed step draws the same mask bit for bit and nothing is
 * stored. The runtime (rt_key), codegen (the same arithmetic in LLVM) and
 * the reference interpreter share these definitions. */
#ifndef DPC_RNG_H
#define DPC_RNG_H

#include <stdint.h>

/* splitmix64's finaliser: every input bit moves every output bit */
static inline uint64_t dp_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* the key of one training step */
static inline uint64_t dp_step_key(uint64_t seed, uint64_t step) { return dp_mix(dp_mix(seed) ^ step); }

/* an element is kept when the top 53 bits of its draw reach this */
static inline uint64_t dp_drop_threshold(double p) { return (uint64_t)(p * 9007199254740992.0); }

#endif
