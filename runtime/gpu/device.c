/* rt: the CUDA device. The PTX that dpc embeds is JIT-loaded with the driver
 * API; GEMMs go to cuBLAS; all work is ordered on one stream, so a step has
 * no host synchronisation until the loss is read. Every driver and cuBLAS
 * call is checked and reported with its file, line and error name. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../rt.h"

/* The driver library comes with the GPU driver, so it is opened at run time:
 * on a machine without one the executable starts and says so. The names go
 * through cuda.h's macros (cuMemAlloc is cuMemAlloc_v2). */
#define DRIVER(X) X(cuInit) X(cuGetErrorName) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
	X(cuCtxSetCurrent) X(cuStreamCreate) X(cuStreamSynchronize) X(cuModuleLoadDataEx) X(cuModuleGetFunction) \
	X(cuMemAlloc) X(cuMemAllocHost) X(cuMemFree) X(cuMemFreeHost) X(cuMemsetD8Async) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuLaunchKernel) \
	X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime) X(cuStreamWaitEvent) \
	X(cuMemHostRegister) X(cuMemHostUnregister) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) \
	X(cuGraphLaunch) X(cuFuncSetAttribute)
#define NAME_(x) #x
#define NAME(x) NAME_(x)
#define DECLARE(f) static __typeof__(&f) p_##f;
DRIVER(DECLARE)

static const char *load_driver(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return "the NVIDIA driver library libcuda.so.1 is not installed";
#define LOOKUP(f) if (!(p_##f = (__typeof__(p_##f))dlsym(lib, NAME(f)))) return "libcuda.so.1 lacks " NAME(f);
	DRIVER(LOOKUP)
	return NULL;
}

#define CU(call) do { \
	CUresult r_ = (call); \
	if (r_ != CUDA_SUCCESS) { \
		const char *n_ = "?"; \
		p_cuGetErrorName(r_, &n_); \
		rt_fail(1, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call, n_); \
	} \
} while (0)

#define CUBLAS(call) do { \
	cublasStatus_t s_ = (call); \
	if (s_ != CUBLAS_STATUS_SUCCESS) \
		rt_fail(1, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call, cublasGetStatusName(s_)); \
} while (0)

static CUcontext ctx;
static CUmodule module;
static CUstream stream;
static cublasHandle_t blas;
static cublasLtHandle_t lt;
static CUfunction *fns;
static int nfns;
static CUevent fences[RT_FENCES];
static bool fence_set[RT_FENCES];

static void gpu_init(void)
{
	/* a library's second session in the process: the context, stream, module and cuBLAS are the first's */
	static bool up;
	if (up) {
		for (int i = 0; i < RT_FENCES; i++)
			fence_set[i] = false;
		CUBLAS(cublasSetMathMode(blas, rt_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
		return;
	}
	const char *why = load_driver();
	if (why)
		rt_fail(1, "this executable was compiled for NVIDIA GPUs (dpc --target cuda), but %s; "
		        "compile with --target cpu to run here", why);
	CUresult r = p_cuInit(0);
	int count = 0;
	if (r == CUDA_SUCCESS)
		r = p_cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS || count == 0) {
		const char *n = "no device";
		if (r != CUDA_SUCCESS)
			p_cuGetErrorName(r, &n);
		rt_fail(1, "this executable was compiled for NVIDIA GPUs (dpc --target cuda), but no CUDA GPU is available (%s); "
		        "compile with --target cpu to run here", n);
	}
	/* under mpirun, the ranks of one machine take its GPUs in turn */
	const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
	CUdevice dev;
	CU(p_cuDeviceGet(&dev, rt_distributed && local ? atoi(local) % count : 0));
	CU(p_cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(p_cuCtxSetCurrent(ctx));
	CU(p_cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < RT_FENCES; i++)
		CU(p_cuEventCreate(&fences[i], CU_EVENT_DISABLE_TIMING));
	char log[8192] = "";
	CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
	CUresult lr = p_cuModuleLoadDataEx(&module, dp_ptx, 2, opts, vals);
	if (lr != CUDA_SUCCESS) {
		const char *n = "?";
		p_cuGetErrorName(lr, &n);
		rt_fail(70, "internal error: the GPU rejected the generated PTX (%s): %s", n, log);
	}
	CUBLAS(cublasCreate(&blas));
	CUBLAS(cublasLtCreate(&lt));
	CUBLAS(cublasSetStream(blas, (cudaStream_t)stream));
	CUBLAS(cublasSetMathMode(blas, rt_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
	up = true;
}

static uint64_t gpu_alloc(int64_t bytes)
{
	CUdeviceptr p;
	if (p_cuMemAlloc(&p, (size_t)bytes) != CUDA_SUCCESS)
		return 0;
	CU(p_cuMemsetD8Async(p, 0, (size_t)bytes, stream));
	return (uint64_t)p;
}

static void sync_stream(CUstream s);
static void gpu_h2d(uint64_t dst, const void *src, int64_t n) { CU(p_cuMemcpyHtoDAsync((CUdeviceptr)dst, src, (size_t)n, stream)); sync_stream(stream); }
static void gpu_h2d_async(uint64_t dst, const void *src, int64_t n) { CU(p_cuMemcpyHtoDAsync((CUdeviceptr)dst, src, (size_t)n, stream)); }

/* Pinned once at start: pinning is slow, and copies from it run at full link speed. */
/* Large buffers (the host pool of streamed parameters) are mapped and then
 * registered: cuMemAllocHost of many GiB is slow. NULL when either fails. */
#define REGISTER_FROM ((int64_t)256 << 20)
static struct {
	void *p;
	size_t bytes;
} mapped[8];

static void *gpu_host_alloc(int64_t bytes)
{
	void *p;
	if (bytes < REGISTER_FROM)
		return p_cuMemAllocHost(&p, (size_t)bytes) == CUDA_SUCCESS ? p : NULL;
	int i = 0;
	while (i < 8 && mapped[i].p)
		i++;
	if (i == 8)
		return NULL;
	p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (p_cuMemHostRegister(p, (size_t)bytes, 0) != CUDA_SUCCESS) {
		munmap(p, (size_t)bytes);
		return NULL;
	}
	mapped[i].p = p;
	mapped[i].bytes = (size_t)bytes;
	return p;
}
static void gpu_d2h(void *dst, uint64_t src, int64_t n) { CU(p_cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, (size_t)n, stream)); sync_stream(stream); }
static void gpu_d2h_async(void *dst, uint64_t src, int64_t n) { CU(p_cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, (size_t)n, stream)); }
static void gpu_d2d(uint64_t dst, uint64_t src, int64_t n) { CU(p_cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, (size_t)n, stream)); }
static void gpu_zero(uint64_t dst, int64_t n) { CU(p_cuMemsetD8Async((CUdeviceptr)dst, 0, (size_t)n, stream)); }

static CUfunction function(int id)
{
	if (id >= nfns) {
		int n = id + 16;
		CUfunction *f = rt_host_grow(fns, (int64_t)sizeof *f * n, "the kernels");
		memset(f + nfns, 0, sizeof *f * (size_t)(n - nfns));
		fns = f;
		nfns = n;
	}
	if (!fns[id]) {
		char name[32];
		snprintf(name, sizeof name, "dp_k%d", id);
		CU(p_cuModuleGetFunction(&fns[id], module, name));
		/* tensor-core attention with heads wider than 64: more than 48 KiB of shared memory, which a
		 * kernel must ask for */
		if (dp_kernel_smem[id] > 0)
			CU(p_cuFuncSetAttribute(fns[id], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dp_kernel_smem[id]));
	}
	return fns[id];
}

static void gpu_launch(int kernel, int64_t n, int64_t work, int nargs, const uint64_t *args)
{
	(void)work;
	void *params[17];
	uint64_t words[17];
	for (int j = 0; j < nargs && j < 16; j++) {
		words[j] = args[j];
		params[j] = &words[j];
	}
	int64_t count = n;
	params[nargs] = &count;
	int64_t blocks = (n + 255) / 256;
	if (blocks > (1 << 20))
		blocks = 1 << 20; /* the kernels stride over the rest */
	CU(p_cuLaunchKernel(function(kernel), (unsigned)blocks, 1, 1, 256, 1, 1, (unsigned)dp_kernel_smem[kernel], stream, params, NULL));
}

/* One product, not a batch: cublasSgemm, cublasDgemm or cublasGemmEx, as
 * PyTorch's matmul calls them, whose heuristics may pick other kernels than
 * the strided-batched entry points' at a batch of one.
 * DPC_GEMM_BATCHED=1 in the environment keeps the strided-batched calls
 * for every product (bench/gpu_quick.sh times both). */
static bool gemm_one(int elem_bytes, cublasOperation_t opa, cublasOperation_t opb, int64_t m, int64_t n, int64_t k,
                     uint64_t a, int64_t lda, uint64_t b, int64_t ldb, uint64_t c, int64_t ldc, double beta)
{
	static int batched = -1;
	if (batched < 0)
		batched = getenv("DPC_GEMM_BATCHED") && !strcmp(getenv("DPC_GEMM_BATCHED"), "1");
	if (batched)
		return false;
	if (elem_bytes == 2 || elem_bytes == RT_GEMM_BF16_F32) {
		float one = 1, fb = (float)beta;
		CUBLAS(cublasGemmEx(blas, opb, opa, (int)n, (int)m, (int)k, &one, (const void *)b, CUDA_R_16BF, (int)ldb,
		                    (const void *)a, CUDA_R_16BF, (int)lda, &fb, (void *)c, elem_bytes == 2 ? CUDA_R_16BF : CUDA_R_32F,
		                    (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	} else if (elem_bytes == 8) {
		double one = 1;
		CUBLAS(cublasDgemm(blas, opb, opa, (int)n, (int)m, (int)k, &one, (const double *)b, (int)ldb, (const double *)a,
		                   (int)lda, &beta, (double *)c, (int)ldc));
	} else {
		float one = 1, fb = (float)beta;
		CUBLAS(cublasSgemm(blas, opb, opa, (int)n, (int)m, (int)k, &one, (const float *)b, (int)ldb, (const float *)a,
		                   (int)lda, &fb, (float *)c, (int)ldc));
	}
	return true;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
static void gpu_gemm(int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
                     int64_t sa, uint64_t b, int64_t ldb, int64_t sb, uint64_t c, int64_t ldc, int64_t sc,
                     int64_t batch, double beta)
{
	cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (batch == 1 && gemm_one(elem_bytes, opa, opb, m, n, k, a, lda, b, ldb, c, ldc, beta))
		return;
	if (elem_bytes == 2 || elem_bytes == RT_GEMM_BF16_F32) {
		/* bf16 storage, f32 accumulation: tensor cores; the result in bf16, or in f32 */
		float one = 1, fb = (float)beta;
		cudaDataType_t ct = elem_bytes == 2 ? CUDA_R_16BF : CUDA_R_32F;
		CUBLAS(cublasGemmStridedBatchedEx(blas, opb, opa, (int)n, (int)m, (int)k, &one, (const void *)b, CUDA_R_16BF, (int)ldb, sb,
		                                  (const void *)a, CUDA_R_16BF, (int)lda, sa, &fb, (void *)c, ct, (int)ldc, sc,
		                                  (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	} else if (elem_bytes == 8) {
		double one = 1;
		CUBLAS(cublasDgemmStridedBatched(blas, opb, opa, (int)n, (int)m, (int)k, &one, (const double *)b, (int)ldb, sb,
		                                 (const double *)a, (int)lda, sa, &beta, (double *)c, (int)ldc, sc, (int)batch));
	} else {
		float one = 1, fb = (float)beta;
		CUBLAS(cublasSgemmStridedBatched(blas, opb, opa, (int)n, (int)m, (int)k, &one, (const float *)b, (int)ldb, sb,
		                                 (const float *)a, (int)lda, sa, &fb, (float *)c, (int)ldc, sc, (int)batch));
	}
}

/* cuBLAS's workspace under --graph (captured GEMMs may not allocate their own), and cuBLASLt's: one
 * allocation, as both run on the one stream */
enum { GEMM_WORKSPACE = 32 << 20 };
static uint64_t gemm_workspace(void)
{
	static uint64_t w;
	if (!w && !(w = gpu_alloc(GEMM_WORKSPACE)))
		rt_fail(1, "cannot allocate cuBLAS's %d MiB workspace", GEMM_WORKSPACE >> 20);
	return w;
}

/* ---- GEMMs with epilogues: cuBLASLt (rt_gemm_ep) ----
 * A call site's shape, pointers' alignments and epilogue make a plan: the
 * descriptors and the algorithm cuBLASLt's heuristic chose, found once
 * (a step repeats the same few shapes). The product is column-major as
 * in gpu_gemm: cuBLASLt's A is our B, its B our A, D is C^T (n x m), so a
 * bias of n elements is one per row of D, as cuBLASLt lays its bias. */
typedef struct {
	int64_t key[12];
	bool none; /* cuBLASLt has no algorithm for it: the caller makes it apart */
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulAlgo_t algo;
} LtPlan;

static LtPlan lt_plans[128];
static int lt_nplans;
static char lt_shape[160]; /* the call being made, for an error's message */

#define LT(call) do { \
	cublasStatus_t s_ = (call); \
	if (s_ != CUBLAS_STATUS_SUCCESS) \
		rt_fail(1, "%s:%d: %s failed for %s: %s", __FILE__, __LINE__, #call, lt_shape, cublasGetStatusName(s_)); \
} while (0)

/* the largest power of two up to 256 that divides p (0: 256) */
static uint32_t align_of(uint64_t p)
{
	uint32_t a = 256;
	while (a > 1 && p % a)
		a /= 2;
	return a;
}

static cublasLtEpilogue_t lt_epilogue(int epi, uint64_t bias, uint64_t aux)
{
	switch (epi) {
	case RT_EP_BIAS: return CUBLASLT_EPILOGUE_BIAS;
	case RT_EP_GELU_BIAS: return aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
	case RT_EP_DGELU: return bias ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
	case RT_EP_BGRAD: return CUBLASLT_EPILOGUE_BGRADA;
	default: rt_fail(70, "internal error: rt_gemm_ep's epilogue %d", epi);
	}
}

static LtPlan *lt_plan(const int64_t *key, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k,
                       int64_t lda, int64_t ldb, int64_t ldc, cublasLtEpilogue_t ep, uint64_t bias, uint64_t aux,
                       int64_t ldaux, const uint32_t *align)
{
	for (int i = 0; i < lt_nplans; i++)
		if (!memcmp(lt_plans[i].key, key, sizeof lt_plans[i].key))
			return &lt_plans[i];
	if (lt_nplans == (int)(sizeof lt_plans / sizeof lt_plans[0]))
		rt_fail(70, "internal error: more than %d GEMM shapes with epilogues", lt_nplans);
	LtPlan *q = &lt_plans[lt_nplans++];
	memcpy(q->key, key, sizeof q->key);
	cudaDataType_t t = elem_bytes == 2 ? CUDA_R_16BF : CUDA_R_32F;
	cublasComputeType_t ct = elem_bytes == 4 && rt_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	LT(cublasLtMatmulDescCreate(&q->desc, ct, CUDA_R_32F));
	int32_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	uint32_t e = (uint32_t)ep;
	LT(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
	LT(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
	LT(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
	/* the heuristic reads the bias and aux pointers' alignment (the key holds it) */
	LT(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
	if (aux) {
		LT(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
		LT(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldaux, sizeof ldaux));
	}
	LT(cublasLtMatrixLayoutCreate(&q->la, t, (uint64_t)(tb ? k : n), (uint64_t)(tb ? n : k), ldb));
	LT(cublasLtMatrixLayoutCreate(&q->lb, t, (uint64_t)(ta ? m : k), (uint64_t)(ta ? k : m), lda));
	LT(cublasLtMatrixLayoutCreate(&q->lc, t, (uint64_t)n, (uint64_t)m, ldc));
	cublasLtMatmulPreference_t pref;
	LT(cublasLtMatmulPreferenceCreate(&pref));
	uint64_t ws = GEMM_WORKSPACE;
	LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
	static const cublasLtMatmulPreferenceAttributes_t at[4] = {
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
	for (int i = 0; i < 4; i++)
		LT(cublasLtMatmulPreferenceSetAttribute(pref, at[i], &align[i], sizeof align[i]));
	cublasLtMatmulHeuristicResult_t r;
	int found = 0;
	cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, q->desc, q->la, q->lb, q->lc, q->lc, pref, 1, &r, &found);
	LT(cublasLtMatmulPreferenceDestroy(pref));
	/* no kernel for it (a shape or an aux leading dimension it declines as invalid): made apart */
	if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE ||
	    (s == CUBLAS_STATUS_SUCCESS && (found == 0 || r.state != CUBLAS_STATUS_SUCCESS))) {
		q->none = true;
		return q;
	}
	LT(s);
	q->algo = r.algo;
	return q;
}

static int gpu_gemm_ep(int epi, int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
                       uint64_t b, int64_t ldb, uint64_t c, int64_t ldc, double beta, uint64_t bias, uint64_t aux,
                       int64_t ldaux)
{
	/* cuBLASLt applies an epilogue to alpha A B + beta C: GELU and its derivative only where beta is 0;
	 * the aux matrix's leading dimension a multiple of 8 and at least D's rows */
	if ((elem_bytes != 2 && elem_bytes != 4) || (beta != 0 && (epi == RT_EP_GELU_BIAS || epi == RT_EP_DGELU)) ||
	    (epi == RT_EP_DGELU && !aux) || (aux && (ldaux % 8 || ldaux < n)))
		return 0;
	cublasLtEpilogue_t ep = lt_epilogue(epi, bias, aux);
	snprintf(lt_shape, sizeof lt_shape, "a GEMM of [%lld x %lld x %lld]%s%s in %s with epilogue %d", (long long)m,
	         (long long)n, (long long)k, ta ? " A^T" : "", tb ? " B^T" : "", elem_bytes == 2 ? "bf16" : "f32", (int)ep);
	/* A and B as cuBLASLt names them (our B and A), C and D */
	uint32_t align[4] = {align_of(b), align_of(a), align_of(c), align_of(c)};
	int64_t key[12] = {(int64_t)ep | (int64_t)elem_bytes << 16 | (int64_t)ta << 24 | (int64_t)tb << 25 | (int64_t)(beta != 0) << 26,
	                   m, n, k, lda, ldb, ldc, ldaux, align[0] | (int64_t)align[1] << 16 | (int64_t)align[2] << 32,
	                   align_of(bias) | (int64_t)align_of(aux) << 16 | (int64_t)!!bias << 32 | (int64_t)!!aux << 33,
	                   rt_tf32, 0}; /* TF32 as this session asks (a library's sessions may differ) */
	LtPlan *q = lt_plan(key, elem_bytes, ta, tb, m, n, k, lda, ldb, ldc, ep, bias, aux, ldaux, align);
	if (q->none)
		return 0;
	LT(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
	if (aux)
		LT(cublasLtMatmulDescSetAttribute(q->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
	float one = 1, fb = (float)beta;
	LT(cublasLtMatmul(lt, q->desc, &one, (const void *)b, q->la, (const void *)a, q->lb, &fb, (const void *)c, q->lc,
	                  (void *)c, q->lc, &q->algo, (void *)gemm_workspace(), GEMM_WORKSPACE, (cudaStream_t)stream));
	return 1;
}

/* rt_gemm_items: cublasGemmBatchedEx over arrays of every item's and
 * head's matrix addresses. The plan's addresses never change, so a call
 * site's arrays are made once, kept in pinned memory and copied up on the
 * stream (a graph captured later needs no copy, or replays it). */
typedef struct {
	uint64_t key[10];
	uint64_t dev; /* B's, then A's, then C's addresses: the column-major order cuBLAS takes */
} Ptrs;
static Ptrs *ptrs;
static int *ptr_slot; /* open addressing over ptrs by the key's hash; -1 empty */
static int64_t nptrs, ptr_slots;

static uint64_t ptr_hash(const uint64_t *key)
{
	uint64_t h = 14695981039346656037ull;
	for (int i = 0; i < 10; i++)
		h = (h ^ key[i]) * 1099511628211ull;
	return h;
}

static int *ptr_find(const uint64_t *key)
{
	int64_t mask = ptr_slots - 1, s = (int64_t)(ptr_hash(key) & (uint64_t)mask);
	while (ptr_slot[s] >= 0 && memcmp(ptrs[ptr_slot[s]].key, key, sizeof ptrs->key))
		s = (s + 1) & mask;
	return &ptr_slot[s];
}

/* n bytes of device memory and of pinned host memory, from chunks kept for the run */
static void ptr_space(int64_t n, uint64_t *dev, void **host)
{
	static uint64_t dchunk;
	static char *hchunk;
	static int64_t left;
	if (n > left) {
		left = n > (1 << 20) ? n : 1 << 20;
		if (!(dchunk = gpu_alloc(left)) || !(hchunk = gpu_host_alloc(left)))
			rt_fail(1, "cannot allocate %lld bytes for attention's GEMM addresses", (long long)left);
	}
	*dev = dchunk;
	*host = hchunk;
	dchunk += (uint64_t)n;
	hchunk += n;
	left -= n;
}

static uint64_t item_pointers(const uint64_t *key, int64_t eb, int64_t cb)
{
	if (2 * (nptrs + 1) > ptr_slots) {
		int64_t n = ptr_slots ? 2 * ptr_slots : 1024;
		ptr_slot = rt_host_grow(ptr_slot, (int64_t)sizeof *ptr_slot * n, "attention's GEMM addresses");
		ptr_slots = n;
		memset(ptr_slot, 0xff, sizeof *ptr_slot * (size_t)n);
		for (int64_t i = 0; i < nptrs; i++)
			*ptr_find(ptrs[i].key) = (int)i;
		ptrs = rt_host_grow(ptrs, (int64_t)sizeof *ptrs * n, "attention's GEMM addresses");
	}
	int *slot = ptr_find(key);
	if (*slot >= 0)
		return ptrs[*slot].dev;
	/* key: a, sa, oa, b, sb, ob, c, sc, oc, batch | items << 32 */
	int64_t batch = (int64_t)(key[9] & 0xffffffffu), items = (int64_t)(key[9] >> 32), n = batch * items;
	void *host;
	uint64_t dev;
	ptr_space(3 * n * 8, &dev, &host);
	uint64_t *w = host;
	static const int order[3] = {3, 0, 6}; /* B, A, C */
	for (int m = 0; m < 3; m++) {
		const uint64_t *k = key + order[m];
		int64_t e = m == 2 ? cb : eb;
		for (int64_t i = 0; i < items; i++)
			for (int64_t j = 0; j < batch; j++)
				w[m * n + i * batch + j] = k[0] + (uint64_t)((i * (int64_t)k[2] + j * (int64_t)k[1]) * e);
	}
	CU(p_cuMemcpyHtoDAsync((CUdeviceptr)dev, host, (size_t)(3 * n * 8), stream));
	Ptrs *p = &ptrs[nptrs];
	memcpy(p->key, key, sizeof p->key);
	p->dev = dev;
	*slot = (int)nptrs++;
	return dev;
}

static void gpu_gemm_items(int elem_bytes, int ta, int tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
                           int64_t sa, int64_t oa, uint64_t b, int64_t ldb, int64_t sb, int64_t ob, uint64_t c,
                           int64_t ldc, int64_t sc, int64_t oc, int64_t batch, int64_t items, double beta)
{
	if (batch * items > INT32_MAX || batch > 0xffffffff || items > 0xffffffff)
		rt_fail(70, "internal error: %lld x %lld GEMMs in one batch", (long long)items, (long long)batch);
	bool bf = elem_bytes == 2 || elem_bytes == RT_GEMM_BF16_F32, f64 = elem_bytes == 8;
	int64_t eb = bf ? 2 : elem_bytes, cb = elem_bytes == RT_GEMM_BF16_F32 ? 4 : eb;
	uint64_t key[10] = {a, (uint64_t)sa, (uint64_t)oa, b, (uint64_t)sb, (uint64_t)ob, c, (uint64_t)sc, (uint64_t)oc,
	                    (uint64_t)batch | (uint64_t)items << 32};
	uint64_t at = item_pointers(key, eb, cb), total = (uint64_t)(batch * items);
	const void *const *pb = (const void *const *)at, *const *pa = (const void *const *)(at + 8 * total);
	void *const *pc = (void *const *)(at + 16 * total);
	cudaDataType_t t = bf ? CUDA_R_16BF : f64 ? CUDA_R_64F : CUDA_R_32F, ct = elem_bytes == RT_GEMM_BF16_F32 ? CUDA_R_32F : t;
	cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	double one = 1;
	float onef = 1, fb = (float)beta;
	const void *alpha = f64 ? (const void *)&one : (const void *)&onef, *bp = f64 ? (const void *)&beta : (const void *)&fb;
	CUBLAS(cublasGemmBatchedEx(blas, opb, opa, (int)n, (int)m, (int)k, alpha, pb, t, (int)ldb, pa, t, (int)lda, bp, pc, ct,
	                           (int)ldc, (int)total, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* ---- the copy streams ----
 * Host-to-device copies on one stream, device-to-host on another, so that
 * the link carries both directions at once; both ordered against the
 * compute stream by events: each copy waits for the compute queued before
 * it, and records its own event in a ring. A ring entry is reused only
 * once the copy it recorded is done, so an older event than the ring holds
 * is always complete. A copy also waits for the latest copy the other way
 * that touches the same device or host bytes (a fetch into a slot after
 * its write-back, a unit read back after it was written down): what one
 * stream's order gave before, for the copies whose order matters. */

enum { RING = 256 };
static CUstream copy_stream, down_stream;
static CUevent ring[RING], queued_work;
static int64_t copies;
/* what each copy in the ring moved */
static struct {
	bool up;
	uint64_t dev;
	uintptr_t host;
	int64_t bytes;
} moved[RING];

static bool overlap(uint64_t a, int64_t an, uint64_t b, int64_t bn) { return a < b + (uint64_t)bn && b < a + (uint64_t)an; }

/* the latest copy still in the ring that went the other way over the same bytes: s waits for it */
static void after_other_way(CUstream s, bool up, uint64_t dev, uintptr_t host, int64_t bytes)
{
	for (int64_t i = copies; i >= 1 && i > copies - RING; i--) {
		int r = (int)(i % RING);
		if (moved[r].up != up && (overlap(moved[r].dev, moved[r].bytes, dev, bytes) ||
		                          overlap(moved[r].host, moved[r].bytes, host, bytes))) {
			CU(p_cuStreamWaitEvent(s, ring[r], 0));
			return;
		}
	}
}

/* --trace: timing events around the copies queued while timing is on, by
 * event - 1 (NULL pairs untimed), and the clock's origin for mark_at */
static bool timing;
static CUevent (*spans)[2];
static int64_t nspans;
static CUevent origin;

static CUevent *timed_span(int64_t event)
{
	if (!timing)
		return NULL;
	if (event > nspans) {
		int64_t n = nspans ? 2 * nspans : 1024;
		while (n < event)
			n *= 2;
		CUevent(*s)[2] = rt_host_grow(spans, (int64_t)sizeof *s * n, "--trace");
		memset(s + nspans, 0, sizeof *s * (size_t)(n - nspans));
		spans = s;
		nspans = n;
	}
	for (int i = 0; i < 2; i++)
		if (!spans[event - 1][i])
			CU(p_cuEventCreate(&spans[event - 1][i], CU_EVENT_DEFAULT));
	return spans[event - 1];
}

static void gpu_copy_timing(bool on) { timing = on; }

static double since_origin(CUevent e)
{
	float ms = 0;
	CU(p_cuEventElapsedTime(&ms, origin, e));
	return ms;
}

static void gpu_copy_span(int64_t event, double *span)
{
	span[0] = span[1] = -1;
	if (event >= 1 && event <= nspans && spans[event - 1][0] && origin) {
		span[0] = since_origin(spans[event - 1][0]);
		span[1] = since_origin(spans[event - 1][1]);
	}
}

/* A host wait on the device. Where NCCL's sums run (data parallelism) a peer that never joins one leaves
 * its kernel spinning and every later wait waiting: so there the wait tests the event until the
 * collectives' deadline (--collective-timeout), then aborts NCCL's communicator and the job (dist.c) */
static bool nccl_on(void);
static void nccl_stop(void);

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void wait_event(CUevent e)
{
	if (!nccl_on()) {
		CU(p_cuEventSynchronize(e));
		return;
	}
	double t0 = wall();
	for (;;) {
		CUresult r = p_cuEventQuery(e);
		if (r == CUDA_SUCCESS)
			return;
		if (r != CUDA_ERROR_NOT_READY)
			CU(r);
		double t = wall() - t0;
		if (t > rt_dist_timeout()) {
			nccl_stop();
			rt_dist_timed_out("the GPUs' sums (NCCL) the device waits for", t);
		}
		nanosleep(&(struct timespec){0, 50000}, NULL);
	}
}

static CUevent synced;

static void sync_stream(CUstream s)
{
	if (!nccl_on()) {
		CU(p_cuStreamSynchronize(s));
		return;
	}
	CU(p_cuEventRecord(synced, s));
	wait_event(synced);
}

static int64_t gpu_copy(bool to_device, uint64_t dev, void *host, int64_t bytes)
{
	if (!copy_stream) {
		CU(p_cuStreamCreate(&copy_stream, CU_STREAM_NON_BLOCKING));
		CU(p_cuStreamCreate(&down_stream, CU_STREAM_NON_BLOCKING));
		CU(p_cuEventCreate(&queued_work, CU_EVENT_DISABLE_TIMING));
		for (int i = 0; i < RING; i++)
			CU(p_cuEventCreate(&ring[i], CU_EVENT_DISABLE_TIMING));
	}
	CUevent e = ring[(copies + 1) % RING];
	if (copies + 1 > RING)
		wait_event(e);
	CUstream s = to_device ? copy_stream : down_stream;
	CU(p_cuEventRecord(queued_work, stream));
	CU(p_cuStreamWaitEvent(s, queued_work, 0));
	after_other_way(s, to_device, dev, (uintptr_t)host, bytes);
	CUevent *span = timed_span(copies + 1);
	if (span)
		CU(p_cuEventRecord(span[0], s));
	if (to_device)
		CU(p_cuMemcpyHtoDAsync((CUdeviceptr)dev, host, (size_t)bytes, s));
	else
		CU(p_cuMemcpyDtoHAsync(host, (CUdeviceptr)dev, (size_t)bytes, s));
	if (span)
		CU(p_cuEventRecord(span[1], s));
	CU(p_cuEventRecord(e, s));
	__atomic_store_n(&copies, copies + 1, __ATOMIC_RELEASE);
	moved[copies % RING].up = to_device;
	moved[copies % RING].dev = dev;
	moved[copies % RING].host = (uintptr_t)host;
	moved[copies % RING].bytes = bytes;
	return copies;
}

/* the copies queued so far: the host update's thread reads it while the main thread queues more */
static int64_t queued(void) { return __atomic_load_n(&copies, __ATOMIC_ACQUIRE); }

static void check_event(int64_t event)
{
	if (event < 1 || event > queued())
		rt_fail(70, "internal error: copy event %lld was never queued", (long long)event);
}

static void gpu_copy_wait(int64_t event)
{
	check_event(event);
	if (event > copies - RING)
		CU(p_cuStreamWaitEvent(stream, ring[event % RING], 0));
}

static void gpu_copy_sync(int64_t event)
{
	check_event(event);
	if (event > queued() - RING)
		wait_event(ring[event % RING]);
}

static CUstream comm_stream;

static void gpu_sync(void)
{
	sync_stream(stream);
	if (copy_stream) {
		sync_stream(copy_stream);
		sync_stream(down_stream);
	}
	if (comm_stream)
		sync_stream(comm_stream);
}

/* at exit, after a sync: errors are not worth reporting any more */
static void gpu_free(uint64_t p) { p_cuMemFree((CUdeviceptr)p); }
static void gpu_host_free(void *p)
{
	for (int i = 0; i < 8; i++)
		if (mapped[i].p == p) {
			p_cuMemHostUnregister(p);
			munmap(p, mapped[i].bytes);
			mapped[i].p = NULL;
			return;
		}
	p_cuMemFreeHost(p);
}

static void gpu_fence(int slot)
{
	CU(p_cuEventRecord(fences[slot], stream));
	fence_set[slot] = true;
}

static void gpu_fence_wait(int slot)
{
	if (fence_set[slot])
		wait_event(fences[slot]);
}

/* profiling marks: timing events, created as needed and kept */
static CUevent *marks;
static int nmarks, capmarks;

static int gpu_mark(void)
{
	if (nmarks == capmarks) {
		int n = capmarks ? 2 * capmarks : 1024;
		CUevent *e = rt_host_grow(marks, (int64_t)sizeof *e * n, "--profile");
		marks = e;
		for (int i = capmarks; i < n; i++)
			CU(p_cuEventCreate(&marks[i], CU_EVENT_DEFAULT));
		capmarks = n;
	}
	if (!origin) {
		CU(p_cuEventCreate(&origin, CU_EVENT_DEFAULT));
		CU(p_cuEventRecord(origin, stream));
	}
	CU(p_cuEventRecord(marks[nmarks], stream));
	return nmarks++;
}

static double gpu_mark_at(int a) { return since_origin(marks[a]); }

static double gpu_mark_ms(int a, int b)
{
	float ms = 0;
	CU(p_cuEventElapsedTime(&ms, marks[a], marks[b]));
	return ms;
}

/* ---- convolutions: cuDNN, opened at run time (libcudnn.so.9) ----
 * Each shape and kind gets its descriptors once and the algorithm cuDNN's
 * heuristics rank first among the deterministic ones whose workspace fits
 * the planned one, so that a step recomputed under checkpointing gives the
 * same bits. */
#define CUDNN_FNS(X) X(cudnnCreate) X(cudnnSetStream) X(cudnnGetErrorString) X(cudnnCreateTensorDescriptor) \
	X(cudnnSetTensor4dDescriptor) X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) \
	X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionMathType) \
	X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
	X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData) \
	X(cudnnConvolutionBackwardFilter) X(cudnnSetConvolutionGroupCount)
CUDNN_FNS(DECLARE)

#define CUDNN(call) do { \
	cudnnStatus_t s_ = (call); \
	if (s_ != CUDNN_STATUS_SUCCESS) \
		rt_fail(1, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call, p_cudnnGetErrorString(s_)); \
} while (0)

static cudnnHandle_t dnn;

static void cudnn_open(void)
{
	if (dnn)
		return;
	void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		rt_fail(1, "this model's convolutions run on cuDNN, but cuDNN 9 (libcudnn.so.9) is not installed: install it "
		        "(it ships with the CUDA toolkit, or as NVIDIA's cudnn9 package), or compile with --reference-kernels");
#define CUDNN_LOOKUP(f) if (!(p_##f = (__typeof__(p_##f))dlsym(lib, #f))) rt_fail(1, "libcudnn.so.9 lacks " #f);
	CUDNN_FNS(CUDNN_LOOKUP)
	CUDNN(p_cudnnCreate(&dnn));
	CUDNN(p_cudnnSetStream(dnn, (cudaStream_t)stream));
}


typedef struct {
	int kind, elem_bytes;
	int64_t dims[RT_CONV_DIMS], ws_bytes;
	cudnnTensorDescriptor_t x, y;
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t conv;
	int algo;
	size_t ws;
	bool extra; /* its workspace is conv_extra, not the planned one */
} Conv;

static Conv *convs;
static int nconvs;
/* the largest workspace cuDNN needed beyond a planned one (none: 0) */
static uint64_t conv_extra;
static size_t conv_extra_bytes;

static Conv *conv_for(int kind, int elem_bytes, const int64_t *d, int64_t ws_bytes)
{
	for (int i = 0; i < nconvs; i++)
		if (convs[i].kind == kind && convs[i].elem_bytes == elem_bytes && convs[i].ws_bytes == ws_bytes &&
		    !memcmp(convs[i].dims, d, sizeof convs[i].dims))
			return &convs[i];
	cudnn_open();
	convs = rt_host_grow(convs, (int64_t)sizeof *convs * (nconvs + 1), "a convolution");
	Conv *v = &convs[nconvs++];
	memset(v, 0, sizeof *v);
	v->kind = kind;
	v->elem_bytes = elem_bytes;
	v->ws_bytes = ws_bytes;
	memcpy(v->dims, d, sizeof v->dims);
	RtConvShape sh = rt_conv_shape(d), *s = &sh;
	cudnnDataType_t dt = elem_bytes == 2 ? CUDNN_DATA_BFLOAT16 : elem_bytes == 8 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
	CUDNN(p_cudnnCreateTensorDescriptor(&v->x));
	CUDNN(p_cudnnCreateTensorDescriptor(&v->y));
	CUDNN(p_cudnnCreateFilterDescriptor(&v->w));
	CUDNN(p_cudnnCreateConvolutionDescriptor(&v->conv));
	CUDNN(p_cudnnSetTensor4dDescriptor(v->x, CUDNN_TENSOR_NCHW, dt, (int)s->n, (int)s->c, (int)s->h, (int)s->w));
	CUDNN(p_cudnnSetTensor4dDescriptor(v->y, CUDNN_TENSOR_NCHW, dt, (int)s->n, (int)s->o, (int)s->ho, (int)s->wo));
	CUDNN(p_cudnnSetFilter4dDescriptor(v->w, dt, CUDNN_TENSOR_NCHW, (int)s->o, (int)(s->c / s->g), (int)s->kh, (int)s->kw));
	CUDNN(p_cudnnSetConvolution2dDescriptor(v->conv, (int)s->ph, (int)s->pw, (int)s->sh, (int)s->sw, (int)s->dh, (int)s->dw,
	                                        CUDNN_CROSS_CORRELATION, elem_bytes == 8 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
	CUDNN(p_cudnnSetConvolutionGroupCount(v->conv, (int)s->g));
	/* f32 may run on tensor cores (TF32), as PyTorch's cuDNN convolutions do, unless --conv-fp32 */
	CUDNN(p_cudnnSetConvolutionMathType(v->conv, elem_bytes == 4 && rt_conv_fp32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
	enum { MAXALGO = 16 };
	int n = 0, best = -1;
	size_t mem[MAXALGO];
	int algo[MAXALGO];
	bool ok[MAXALGO];
	if (kind == 0) {
		cudnnConvolutionFwdAlgoPerf_t r[MAXALGO];
		CUDNN(p_cudnnGetConvolutionForwardAlgorithm_v7(dnn, v->x, v->w, v->conv, v->y, MAXALGO, &n, r));
		for (int i = 0; i < n; i++)
			algo[i] = r[i].algo, mem[i] = r[i].memory, ok[i] = r[i].status == CUDNN_STATUS_SUCCESS && r[i].determinism == CUDNN_DETERMINISTIC;
	} else if (kind == 1) {
		cudnnConvolutionBwdDataAlgoPerf_t r[MAXALGO];
		CUDNN(p_cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, v->w, v->y, v->conv, v->x, MAXALGO, &n, r));
		for (int i = 0; i < n; i++)
			algo[i] = r[i].algo, mem[i] = r[i].memory, ok[i] = r[i].status == CUDNN_STATUS_SUCCESS && r[i].determinism == CUDNN_DETERMINISTIC;
	} else {
		cudnnConvolutionBwdFilterAlgoPerf_t r[MAXALGO];
		CUDNN(p_cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, v->x, v->y, v->conv, v->w, MAXALGO, &n, r));
		for (int i = 0; i < n; i++)
			algo[i] = r[i].algo, mem[i] = r[i].memory, ok[i] = r[i].status == CUDNN_STATUS_SUCCESS && r[i].determinism == CUDNN_DETERMINISTIC;
	}
	/* cuDNN ranks them fastest first: the first deterministic one that fits the planned workspace */
	int fastest = -1;
	for (int i = 0; i < n; i++) {
		fastest = fastest < 0 && ok[i] ? i : fastest;
		if (best < 0 && ok[i] && mem[i] <= (size_t)ws_bytes)
			best = i;
	}
	static const char *name[3] = {"conv2d", "conv2d_dx", "conv2d_dw"};
	if (rt_verbose && best > fastest && fastest >= 0)
		fprintf(stderr, "note: cuDNN's fastest deterministic %s [%lld, %lld, %lld, %lld] * [%lld, %lld, %lld, %lld] needs "
		        "%zu bytes of workspace, more than the planned %lld: a slower one runs (dpc plans up to 64 MiB, or a "
		        "sixteenth of --device-mem)\n", name[kind], (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w,
		        (long long)s->o, (long long)s->c, (long long)s->kh, (long long)s->kw, mem[fastest], (long long)ws_bytes);
	if (best < 0) {
		/* none fits the plan's workspace (one image's windows): the
		 * deterministic one that needs least, in a workspace of its own */
		for (int i = 0; i < n; i++)
			if (ok[i] && (best < 0 || mem[i] < mem[best]))
				best = i;
		if (best < 0)
			rt_fail(1, "cuDNN has no deterministic algorithm for %s [%lld, %lld, %lld, %lld] * [%lld, %lld, %lld, %lld]; "
			        "compile with --reference-kernels", name[kind], (long long)s->n, (long long)s->c, (long long)s->h,
			        (long long)s->w, (long long)s->o, (long long)s->c, (long long)s->kh, (long long)s->kw);
		if (mem[best] > conv_extra_bytes) {
			fprintf(stderr, "note: cuDNN's deterministic %s [%lld, %lld, %lld, %lld] * [%lld, %lld, %lld, %lld] needs a workspace "
			        "of %zu bytes, more than the planned %lld: it gets one outside the plan\n", name[kind], (long long)s->n,
			        (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->o, (long long)s->c, (long long)s->kh,
			        (long long)s->kw, mem[best], (long long)ws_bytes);
			if (conv_extra) { /* the smaller one may still be in use */
				CU(p_cuStreamSynchronize(stream));
				CU(p_cuMemFree((CUdeviceptr)conv_extra));
			}
			if (!(conv_extra = gpu_alloc((int64_t)mem[best])))
				rt_fail(1, "cannot allocate %zu bytes of workspace for cuDNN's %s", mem[best], name[kind]);
			conv_extra_bytes = mem[best];
		}
		v->extra = true;
	}
	v->algo = algo[best];
	v->ws = mem[best];
	return v;
}

static void gpu_conv(int kind, int elem_bytes, const int64_t *d, uint64_t x, uint64_t w, uint64_t y, uint64_t ws, int64_t ws_bytes)
{
	Conv *v = conv_for(kind, elem_bytes, d, ws_bytes);
	double one = 1, zero = 0;
	float onef = 1, zerof = 0;
	const void *a = elem_bytes == 8 ? (const void *)&one : (const void *)&onef;
	const void *b = elem_bytes == 8 ? (const void *)&zero : (const void *)&zerof;
	void *work = !v->ws ? NULL : v->extra ? (void *)conv_extra : (void *)ws;
	if (kind == 0)
		CUDNN(p_cudnnConvolutionForward(dnn, a, v->x, (void *)x, v->w, (void *)w, v->conv, (cudnnConvolutionFwdAlgo_t)v->algo,
		                                work, v->ws, b, v->y, (void *)y));
	else if (kind == 1)
		CUDNN(p_cudnnConvolutionBackwardData(dnn, a, v->w, (void *)w, v->y, (void *)y, v->conv,
		                                     (cudnnConvolutionBwdDataAlgo_t)v->algo, work, v->ws, b, v->x, (void *)x));
	else
		CUDNN(p_cudnnConvolutionBackwardFilter(dnn, a, v->x, (void *)x, v->y, (void *)y, v->conv,
		                                       (cudnnConvolutionBwdFilterAlgo_t)v->algo, work, v->ws, b, v->w, (void *)w));
}

/* One graph: dp_step's launches, captured once. Relaxed capture: the
 * runtime may allocate pinned host memory for a fused revolve's actions
 * while it captures. cuBLAS gets a workspace of its own first, so that its
 * GEMMs capture without allocating. */
/* ---- data parallelism: NCCL, bootstrapped through MPI, on a stream of its own ----
 * libnccl is opened at the first collective, so that an executable that
 * never runs under mpirun does not need it. A collective waits for the
 * compute queued so far (an event) and runs on the comm stream beside what
 * follows; collective_wait makes the compute stream wait for it. */
#define NCCL_FNS(X) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclAllReduce) X(ncclBroadcast) X(ncclGetErrorString) \
	X(ncclGroupStart) X(ncclGroupEnd) X(ncclCommAbort) X(ncclCommGetAsyncError)
NCCL_FNS(DECLARE)
static ncclComm_t nccl;
static CUevent comm_ready, comm_done;

#define NCCL(call) do { \
	ncclResult_t r_ = (call); \
	if (r_ != ncclSuccess) \
		rt_fail(1, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call, p_ncclGetErrorString(r_)); \
} while (0)

static void nccl_start(void)
{
	void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		rt_fail(1, "data parallelism on GPUs sums through NCCL, and libnccl.so.2 cannot be opened: %s", dlerror());
#define NCCL_LOOKUP(f) if (!(p_##f = (__typeof__(p_##f))dlsym(lib, #f))) rt_fail(1, "libnccl.so.2 lacks %s", #f);
	NCCL_FNS(NCCL_LOOKUP)
	/* rank 0's id reaches the others through MPI */
	ncclUniqueId id;
	if (rt_rank == 0)
		NCCL(p_ncclGetUniqueId(&id));
	rt_dist_bcast(&id, (int64_t)sizeof id, "the broadcast of NCCL's id");
	NCCL(p_ncclCommInitRank(&nccl, rt_nranks, id, rt_rank));
	CU(p_cuStreamCreate(&comm_stream, CU_STREAM_NON_BLOCKING));
	CU(p_cuEventCreate(&comm_ready, CU_EVENT_DISABLE_TIMING));
	CU(p_cuEventCreate(&comm_done, CU_EVENT_DISABLE_TIMING));
	CU(p_cuEventCreate(&synced, CU_EVENT_DISABLE_TIMING));
}

static bool nccl_on(void) { return nccl != NULL; }

/* the communicator aborted: its kernels stop spinning, so that the job can end */
static void nccl_stop(void)
{
	ncclComm_t c = nccl;
	nccl = NULL;
	p_ncclCommAbort(c);
}

static void gpu_collective(int op, uint64_t dev, int64_t n, const char *dtype, const char *what)
{
	if (!nccl)
		nccl_start();
	ncclDataType_t t = !strcmp(dtype, "f64") ? ncclFloat64 : !strcmp(dtype, "bf16") ? ncclBfloat16
	                 : !strcmp(dtype, "i32") ? ncclInt32 : ncclFloat32;
	CU(p_cuEventRecord(comm_ready, stream));
	CU(p_cuStreamWaitEvent(comm_stream, comm_ready, 0));
	if (op == RT_SUM) {
		NCCL(p_ncclAllReduce((void *)dev, (void *)dev, (size_t)n, t, ncclSum, nccl, (cudaStream_t)comm_stream));
	} else if (op == RT_BCAST) {
		NCCL(p_ncclBroadcast((void *)dev, (void *)dev, (size_t)n, t, 0, nccl, (cudaStream_t)comm_stream));
	} else {
		/* each rank's share from it to all: a broadcast per share, in one group */
		int64_t esz = rt_elem_bytes(dtype);
		NCCL(p_ncclGroupStart());
		for (int r = 0; r < rt_nranks; r++) {
			RtTensor share = {.numel = n};
			int64_t k, lo = rt_share(&share, r, rt_nranks, &k);
			void *at = (void *)(uintptr_t)(dev + (uint64_t)(lo * esz));
			if (k > 0)
				NCCL(p_ncclBroadcast(at, at, (size_t)k, t, r, nccl, (cudaStream_t)comm_stream));
		}
		NCCL(p_ncclGroupEnd());
	}
}

static void gpu_collective_wait(void)
{
	if (!nccl)
		return;
	CU(p_cuEventRecord(comm_done, comm_stream));
	CU(p_cuStreamWaitEvent(stream, comm_done, 0));
}

static CUgraphExec graph_exec;

static void gpu_graph_begin(void)
{
	static bool set;
	if (!set)
		CUBLAS(cublasSetWorkspace(blas, (void *)gemm_workspace(), GEMM_WORKSPACE));
	set = true;
	CU(p_cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
}

static void gpu_graph_end(void)
{
	CUgraph g;
	CU(p_cuStreamEndCapture(stream, &g));
	CU(p_cuGraphInstantiate(&graph_exec, g, 0));
}

static void gpu_graph_launch(void) { CU(p_cuGraphLaunch(graph_exec, stream)); }

/* the host's optimizer thread (host_update.c) waits for copies: it needs the context. A copy's ring entry
 * is recorded again only after the copy is done, so a wait that meets a newer copy there only waits longer. */
static void gpu_thread_init(void) { CU(p_cuCtxSetCurrent(ctx)); }

const RtDevice rt_cuda_device = {"cuda", gpu_init, gpu_alloc, gpu_h2d, gpu_host_alloc, gpu_h2d_async, gpu_d2h, gpu_d2h_async,
                                 gpu_d2d, gpu_zero, gpu_launch, gpu_gemm, gpu_sync, gpu_fence, gpu_fence_wait, gpu_mark,
                                 gpu_mark_ms, gpu_free, gpu_host_free, gpu_copy, gpu_copy_wait, gpu_copy_sync,
                                 gpu_graph_begin, gpu_graph_end, gpu_graph_launch, gpu_copy_timing, gpu_copy_span, gpu_mark_at,
                                 gpu_conv, NULL, gpu_collective, gpu_collective_wait, gpu_gemm_items, gpu_gemm_ep,
                                 gpu_thread_init};
