/* rt, the CPU device's own header: what its files share. */
#ifndef DPRT_CPU_H
#define DPRT_CPU_H

#include "../rt.h"

/* the threads the CPU device splits work between (OMP_NUM_THREADS, ...) */
int rt_cpu_threads(void);
/* runs fn(arg, i) for i in [0, n) on the device's threads, each i on one
 * thread, the share of each thread fixed by n and the thread count */
void rt_cpu_parallel(int64_t n, void (*fn)(void *arg, int64_t i), void *arg);

/* from now on the device's parallel work runs on the OpenMP team of
 * libgomp, which lib (oneDNN) has loaded */
void rt_cpu_share_openmp(void *lib);

/* the device's conv hook (conv.c) and attention hook (attention.c): see RtDevice */
void rt_cpu_conv(int kind, int elem_bytes, const int64_t *dims, uint64_t x, uint64_t w, uint64_t y, uint64_t ws,
                 int64_t ws_bytes);
void rt_cpu_attention(int kind, int elem_bytes, const int64_t *dims, const uint64_t *in, uint64_t out);

#endif
