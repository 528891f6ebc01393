"""JAX reference for samples/oscillator.dp: the same damped oscillators as a
lax.scan over time, in sqrt(T) segments each under jax.checkpoint (a scan
of segments, each a scan of steps: only the segments' starts are kept, and
each segment's steps are computed again in the backward pass). fp32, plain
SGD, the whole training step under jax.jit. Prints ms/step after the
compiling warm-up.

    python3 bench/sim_jax.py -T 10000 [--segments 100] [--steps 5]
"""
import argparse
import math
import time

import jax
import jax.numpy as jnp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-T", type=int, default=10000)
    ap.add_argument("-B", type=int, default=32)
    ap.add_argument("--segments", type=int, default=-1, help="checkpointed segments (default sqrt(T))")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    a = ap.parse_args()
    segs = max(1, round(math.sqrt(a.T)) if a.segments < 0 else a.segments)
    length, rest = divmod(a.T, segs)
    key = jax.random.split(jax.random.PRNGKey(0), 6)
    p = {
        "k": 0.5 + jax.random.uniform(key[0], (1,)),
        "c": 0.1 + 0.2 * jax.random.uniform(key[1], (1,)),
        "gain": 0.1 * jax.random.normal(key[2], (1,)),
        "drive": 0.1 * jax.random.normal(key[3], (1,)),
    }
    x0 = jax.random.normal(key[4], (a.B,))
    target = jax.random.normal(key[5], (a.B,))
    dt = 0.001

    def step(carry, _):
        x, v, q = carry
        v = v + dt * (q["drive"] - q["k"] * x - q["c"] * v)
        x = x + dt * v
        return (x, v, q), None

    @jax.checkpoint
    def segment(carry, _):
        carry, _ = jax.lax.scan(step, carry, None, length=length)
        return carry, None

    def loss(q):
        carry = (x0 * q["gain"], x0 * 0, q)
        carry, _ = jax.lax.scan(segment, carry, None, length=segs)
        if rest:
            carry, _ = jax.lax.scan(step, carry, None, length=rest)
        return jnp.mean((carry[0] - target) ** 2)

    @jax.jit
    def train(q):
        value, g = jax.value_and_grad(loss)(q)
        return jax.tree_util.tree_map(lambda w, d: w - a.lr * d, q, g), value

    p, value = train(p)
    jax.block_until_ready(value)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        p, value = train(p)
    jax.block_until_ready(value)
    ms = 1000 * (time.perf_counter() - t0) / a.steps
    dev = jax.devices()[0].platform
    print(f"jax scan T={a.T} B={a.B} segments={segs} on {dev}: {ms:.3f} ms/step, loss {float(value):.6g}")


if __name__ == "__main__":
    main()
