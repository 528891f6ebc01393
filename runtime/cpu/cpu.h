/* rt, the CPU device's own header: what its files share. */
#ifndef DPRT_CPU_H
#define DPRT_CPU_H

#include "../rt.h"

/* runs fn(arg, i) for i in [0, n) on the device's threads, each i on one
 * thread, taken in turn */
void rt_cpu_parallel(int64_t n, void (*fn)(void *arg, int64_t i), void *arg);

/* C = op(A) op(B) + beta C for batch matrices (strides sa, sb, sc in
 * elements; elem 4 or 8), in row-major BLAS terms, on the device's
 * threads: cut into tiles by the shape alone, so that every element's
 * bits are the same at any thread count */
void rt_cpu_gemm(int elem, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, int64_t sa,
                 const void *b, int64_t ldb, int64_t sb, void *c, int64_t ldc, int64_t sc, int64_t batch, double beta);

/* one f32 GEMM on the calling thread alone through oneDNN (row-major, as
 * cblas_sgemm with alpha 1); false, having done nothing, where oneDNN is
 * missing or DPC_GEMM=openblas asks for OpenBLAS (onednn.c) */
bool rt_cpu_dnnl_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float beta, float *c, int64_t ldc);

/* the device's conv hook (conv.c) and attention hook (attention.c): see RtDevice */
void rt_cpu_conv(int kind, int elem_bytes, const int64_t *dims, uint64_t x, uint64_t w, uint64_t y, uint64_t ws,
                 int64_t ws_bytes);
void rt_cpu_attention(int kind, int elem_bytes, const int64_t *dims, const uint64_t *in, uint64_t out);

#endif
