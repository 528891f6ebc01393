/* rt: convolutions on the CPU (the conv2d ops, rt_conv).
 *
 * f32 goes to oneDNN, opened at run time (libdnnl.so.2, Debian's libdnnl2):
 * its blocked layouts run the convolution several times faster than a
 * GEMM over the unfolded windows, even with the reorders to and from NCHW
 * that each call makes. oneDNN keeps its primitives, the reordered
 * tensors and its scratchpad in memory of its own, apart from the arena.
 *
 * Everything else (f64, bf16, grouped convolutions, or f32 without oneDNN)
 * takes dpc's own path:
 * each image's windows unfolded into the planned workspace as a matrix
 * [C kh kw, rows Wo], a band of output rows at a time (as many as the
 * workspace holds: the CPU target plans a band of at least 64 output
 * positions), then one GEMM (OpenBLAS) per band. bf16 is widened to f32 first
 * and the result rounded back, as bf16 GEMMs are. */
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"


static void *P(uint64_t a) { return (void *)(uintptr_t)a; }

/* of x, w and y (0, 1, 2), the one that kind 0 (y), 1 (dx) or 2 (dw) writes */
static int result_of(int kind) { return kind == 0 ? 2 : kind - 1; }

/* ---- dpc's own path ---- */

/* output rows i0 .. i0 + nr - 1 of nc channels of x [C, H, W] (one image,
 * from the group's first channel) to cols [nc kh kw, nr Wo]: zero outside x */
#define UNFOLD(T)                                                                                              \
	static void unfold_##T(const RtConvShape *s, int64_t nc, const T *x, T *cols, int64_t i0, int64_t nr)        \
	{                                                                                                        \
		int64_t P = nr * s->wo;                                                                              \
		for (int64_t c = 0; c < nc; c++)                                                                     \
			for (int64_t a = 0; a < s->kh; a++)                                                              \
				for (int64_t b = 0; b < s->kw; b++) {                                                        \
					T *row = cols + ((c * s->kh + a) * s->kw + b) * P;                                       \
					for (int64_t i = 0; i < nr; i++) {                                                       \
						int64_t h = (i0 + i) * s->sh - s->ph + a * s->dh;                                    \
						T *r = row + i * s->wo;                                                              \
						if (h < 0 || h >= s->h) {                                                           \
							memset(r, 0, sizeof(T) * (size_t)s->wo);                                         \
							continue;                                                                        \
						}                                                                                    \
						const T *src = x + (c * s->h + h) * s->w;                                          \
						for (int64_t j = 0; j < s->wo; j++) {                                                \
							int64_t v = j * s->sw - s->pw + b * s->dw;                                       \
							r[j] = v >= 0 && v < s->w ? src[v] : 0;                                         \
						}                                                                                    \
					}                                                                                        \
				}                                                                                            \
	}                                                                                                        \
	/* those rows' cols added into x where each element came from */                                         \
	static void fold_##T(const RtConvShape *s, int64_t nc, const T *cols, T *x, int64_t i0, int64_t nr)          \
	{                                                                                                        \
		int64_t P = nr * s->wo;                                                                              \
		for (int64_t c = 0; c < nc; c++)                                                                     \
			for (int64_t a = 0; a < s->kh; a++)                                                              \
				for (int64_t b = 0; b < s->kw; b++) {                                                        \
					const T *row = cols + ((c * s->kh + a) * s->kw + b) * P;                                 \
					for (int64_t i = 0; i < nr; i++) {                                                       \
						int64_t h = (i0 + i) * s->sh - s->ph + a * s->dh;                                    \
						if (h < 0 || h >= s->h)                                                             \
							continue;                                                                        \
						T *dst = x + (c * s->h + h) * s->w;                                                \
						const T *r = row + i * s->wo;                                                        \
						for (int64_t j = 0; j < s->wo; j++) {                                                \
							int64_t v = j * s->sw - s->pw + b * s->dw;                                       \
							if (v >= 0 && v < s->w)                                                         \
								dst[v] += r[j];                                                              \
						}                                                                                    \
					}                                                                                        \
				}                                                                                            \
	}
UNFOLD(float)
UNFOLD(double)

/* One image at a time, in bands of `band` output rows (as many as the
 * planned workspace holds), one group at a time: unfold the group's
 * channels of the band, then a GEMM with the group's weights as
 * [O/G, C/G kh kw] on the band's columns of the group's rows of y (leading
 * dimension Ho Wo). */
#define OWN(T, GEMM)                                                                                          \
	static void own_##T(int kind, const RtConvShape *s, T *x, T *w, T *y, T *cols, int64_t band)                 \
	{                                                                                                        \
		int64_t G = s->g, P = s->ho * s->wo, nc = s->c / G, K = nc * s->kh * s->kw, O = s->o / G;           \
		int64_t xs = s->c * s->h * s->w, ys = s->o * P;                                                   \
		for (int64_t n = 0; n < s->n; n++) {                                                                \
			if (kind == 1)                                                                                   \
				memset(x + n * xs, 0, sizeof(T) * (size_t)xs);                                             \
			for (int64_t i0 = 0; i0 < s->ho; i0 += band)                                                     \
				for (int64_t gi = 0; gi < G; gi++) {                                                         \
					int64_t nr = s->ho - i0 < band ? s->ho - i0 : band, Q = nr * s->wo;                      \
					T *yb = y + n * ys + gi * O * P + i0 * s->wo, *wg = w + gi * O * K;                      \
					T *xg = x + n * xs + gi * nc * s->h * s->w;                                              \
					if (kind == 1) {                                                                         \
						GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)Q, (int)O, 1, wg, (int)K, \
						     yb, (int)P, 0, cols, (int)Q);                                                   \
						fold_##T(s, nc, cols, xg, i0, nr);                                                   \
						continue;                                                                            \
					}                                                                                        \
					unfold_##T(s, nc, xg, cols, i0, nr);                                                     \
					if (kind == 0)                                                                           \
						GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)O, (int)Q, (int)K, 1, wg,       \
						     (int)K, cols, (int)Q, 0, yb, (int)P);                                           \
					else                                                                                     \
						GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)O, (int)K, (int)Q, 1, yb, (int)P, \
						     cols, (int)Q, n || i0 ? 1 : 0, wg, (int)K);                                     \
				}                                                                                            \
		}                                                                                                    \
	}
OWN(float, cblas_sgemm)
OWN(double, cblas_dgemm)

/* an f32 copy of n bf16 values at a, or (for the result) room for them */
static float *widened(uint64_t a, int64_t n, bool copy)
{
	float *f = rt_host_alloc((int64_t)sizeof(float) * (n ? n : 1), "a bf16 convolution");
	for (int64_t i = 0; copy && i < n; i++)
		f[i] = rt_bf16_to_f32(((const uint16_t *)P(a))[i]);
	return f;
}

static void own(int kind, int elem_bytes, const RtConvShape *s, uint64_t x, uint64_t w, uint64_t y, uint64_t ws, int64_t ws_bytes)
{
	int64_t cbytes = elem_bytes == 8 ? 8 : 4, row = s->c / s->g * s->kh * s->kw * s->wo * cbytes;
	if (ws_bytes < row)
		rt_fail(70, "internal error: a convolution's workspace of %lld bytes is too small", (long long)ws_bytes);
	/* the output rows a band unfolds: as many as the workspace holds */
	int64_t band = ws_bytes / row < s->ho ? ws_bytes / row : s->ho;
	if (elem_bytes == 8) {
		own_double(kind, s, P(x), P(w), P(y), P(ws), band);
		return;
	}
	if (elem_bytes == 4) {
		own_float(kind, s, P(x), P(w), P(y), P(ws), band);
		return;
	}
	int64_t n[3] = {s->n * s->c * s->h * s->w, s->o * s->c / s->g * s->kh * s->kw, s->n * s->o * s->ho * s->wo};
	uint64_t at[3] = {x, w, y};
	int r = result_of(kind);
	float *f[3];
	for (int i = 0; i < 3; i++)
		f[i] = widened(at[i], n[i], i != r);
	own_float(kind, s, f[0], f[1], f[2], P(ws), band);
	uint16_t *out = P(at[r]);
	for (int64_t i = 0; i < n[r]; i++)
		out[i] = rt_f32_to_bf16(f[r][i]);
	for (int i = 0; i < 3; i++)
		free(f[i]);
}

/* ---- oneDNN ---- */

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define HAVE_DNNL 1

#define DNNL_FNS(X) X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_stream_wait) X(dnnl_memory_desc_init_by_tag) \
	X(dnnl_dilated_convolution_forward_desc_init) X(dnnl_dilated_convolution_backward_data_desc_init) \
	X(dnnl_dilated_convolution_backward_weights_desc_init) X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_query_md) \
	X(dnnl_primitive_create) X(dnnl_primitive_execute) X(dnnl_memory_create) X(dnnl_memory_set_data_handle) \
	X(dnnl_memory_desc_equal) X(dnnl_reorder_primitive_desc_create) X(dnnl_primitive_desc_destroy)
#define DNNL_DECLARE(f) static __typeof__(&f) p_##f;
DNNL_FNS(DNNL_DECLARE)

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static int dnnl_state; /* 0 not tried, 1 loaded, -1 missing */

/* Opens oneDNN once. Its OpenMP threads are told the device's count, and
 * to spin only briefly before they sleep (GOMP_SPINCOUNT, unless the user
 * set it or OMP_WAIT_POLICY): the device's own threads want the cores
 * between convolutions, but waking a sleeping team for each of a
 * convolution's parallel regions costs more than it computes. */
static bool dnnl_open(void)
{
	if (dnnl_state)
		return dnnl_state > 0;
	dnnl_state = -1;
	if (!getenv("OMP_WAIT_POLICY"))
		setenv("GOMP_SPINCOUNT", "10000", 0);
	/* DPC_ONEDNN names another file to open (the tests name a missing one) */
	const char *name = getenv("DPC_ONEDNN") ? getenv("DPC_ONEDNN") : "libdnnl.so.2";
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	const char *why = lib ? NULL : "oneDNN (libdnnl.so.2, Debian's libdnnl2) cannot be opened";
#define DNNL_LOOKUP(f) if (!why && !(p_##f = (__typeof__(p_##f))dlsym(lib, #f))) why = "libdnnl.so.2 lacks " #f;
	DNNL_FNS(DNNL_LOOKUP)
	if (!why && (p_dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
	             p_dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success))
		why = "oneDNN could not start on this CPU";
	if (why) {
		fprintf(stderr, "%s: warning: %s; convolutions run on dpc's own, slower path\n", rt_prog, why);
		return false;
	}
	void (*threads)(int) = (void (*)(int))dlsym(lib, "omp_set_num_threads");
	if (threads)
		threads(rt_cpu_threads());
	rt_cpu_share_openmp(lib);
	dnnl_state = 1;
	return true;
}

#define DNNL(call) do { \
	dnnl_status_t s_ = (call); \
	if (s_ != dnnl_success) \
		rt_fail(1, "%s:%d: %s failed: oneDNN status %d", __FILE__, __LINE__, #call, (int)s_); \
} while (0)

/* One convolution's primitive for one kind, with the memories of the
 * caller's tensors (NCHW, OIHW: their addresses set at each call) and of
 * the layouts oneDNN chose, and the reorders between them. */
typedef struct {
	int kind;
	int64_t dims[RT_CONV_DIMS];
	dnnl_primitive_t prim;
	dnnl_memory_t user[3], mine[3]; /* x, w, y; mine[i] == user[i] where the layouts agree */
	dnnl_primitive_t in[3], out;    /* reorders: the operands in, the result out */
} Conv;

static Conv *convs;
static int nconvs;

static void md(dnnl_memory_desc_t *m, int64_t a, int64_t b, int64_t c, int64_t d, dnnl_format_tag_t tag)
{
	dnnl_dims_t dims = {a, b, c, d};
	DNNL(p_dnnl_memory_desc_init_by_tag(m, 4, dims, dnnl_f32, tag));
}

static dnnl_primitive_t reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t r;
	DNNL(p_dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, NULL));
	DNNL(p_dnnl_primitive_create(&r, pd));
	DNNL(p_dnnl_primitive_desc_destroy(pd));
	return r;
}

static Conv *conv_for(int kind, const int64_t *d, const RtConvShape *s)
{
	for (int i = 0; i < nconvs; i++)
		if (convs[i].kind == kind && !memcmp(convs[i].dims, d, sizeof convs[i].dims))
			return &convs[i];
	convs = rt_host_grow(convs, (int64_t)sizeof *convs * (nconvs + 1), "a convolution");
	Conv *v = &convs[nconvs++];
	memset(v, 0, sizeof *v);
	v->kind = kind;
	memcpy(v->dims, d, sizeof v->dims);
	dnnl_memory_desc_t um[3], any[3];
	int64_t shape[3][4] = {{s->n, s->c, s->h, s->w}, {s->o, s->c, s->kh, s->kw}, {s->n, s->o, s->ho, s->wo}};
	for (int i = 0; i < 3; i++) {
		md(&um[i], shape[i][0], shape[i][1], shape[i][2], shape[i][3], i == 1 ? dnnl_oihw : dnnl_nchw);
		md(&any[i], shape[i][0], shape[i][1], shape[i][2], shape[i][3], dnnl_format_tag_any);
	}
	dnnl_dims_t strides = {s->sh, s->sw}, dil = {s->dh - 1, s->dw - 1}, pad = {s->ph, s->pw};
	/* the right padding that gives Ho, Wo: what of the last window lies beyond x */
	dnnl_dims_t padr = {(s->ho - 1) * s->sh + (s->kh - 1) * s->dh + 1 - s->h - s->ph,
	                    (s->wo - 1) * s->sw + (s->kw - 1) * s->dw + 1 - s->w - s->pw};
	dnnl_convolution_desc_t fd, cd;
	dnnl_primitive_desc_t fwd, pd;
	DNNL(p_dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &any[0], &any[1],
	                                                   NULL, &any[2], strides, dil, pad, padr));
	DNNL(p_dnnl_primitive_desc_create(&fwd, &fd, NULL, engine, NULL));
	pd = fwd;
	if (kind == 1) {
		DNNL(p_dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &any[0], &any[1], &any[2], strides,
		                                                         dil, pad, padr));
		DNNL(p_dnnl_primitive_desc_create(&pd, &cd, NULL, engine, fwd));
	} else if (kind == 2) {
		DNNL(p_dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &any[0], &any[1], NULL, &any[2],
		                                                            strides, dil, pad, padr));
		DNNL(p_dnnl_primitive_desc_create(&pd, &cd, NULL, engine, fwd));
	}
	DNNL(p_dnnl_primitive_create(&v->prim, pd));
	static const dnnl_query_t q[3][3] = {{dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
	                                     {dnnl_query_diff_src_md, dnnl_query_weights_md, dnnl_query_diff_dst_md},
	                                     {dnnl_query_src_md, dnnl_query_diff_weights_md, dnnl_query_diff_dst_md}};
	for (int i = 0; i < 3; i++) {
		const dnnl_memory_desc_t *m = p_dnnl_primitive_desc_query_md(pd, q[kind][i], 0);
		DNNL(p_dnnl_memory_create(&v->user[i], &um[i], engine, DNNL_MEMORY_NONE));
		v->mine[i] = v->user[i];
		if (p_dnnl_memory_desc_equal(m, &um[i]))
			continue;
		DNNL(p_dnnl_memory_create(&v->mine[i], m, engine, DNNL_MEMORY_ALLOCATE));
		if (i == result_of(kind))
			v->out = reorder(m, &um[i]);
		else
			v->in[i] = reorder(&um[i], m);
	}
	/* the primitive and the memories keep what they need of the descriptors */
	if (pd != fwd)
		DNNL(p_dnnl_primitive_desc_destroy(pd));
	DNNL(p_dnnl_primitive_desc_destroy(fwd));
	return v;
}

static void run(dnnl_primitive_t p, int n, const int *arg, dnnl_memory_t *mem)
{
	dnnl_exec_arg_t a[3];
	for (int i = 0; i < n; i++)
		a[i] = (dnnl_exec_arg_t){arg[i], mem[i]};
	DNNL(p_dnnl_primitive_execute(p, stream, n, a));
}

static void dnnl_conv(int kind, const int64_t *d, const RtConvShape *s, uint64_t x, uint64_t w, uint64_t y)
{
	Conv *v = conv_for(kind, d, s);
	uint64_t at[3] = {x, w, y};
	for (int i = 0; i < 3; i++)
		DNNL(p_dnnl_memory_set_data_handle(v->user[i], P(at[i])));
	for (int i = 0; i < 3; i++)
		if (v->in[i])
			run(v->in[i], 2, (int[]){DNNL_ARG_FROM, DNNL_ARG_TO}, (dnnl_memory_t[]){v->user[i], v->mine[i]});
	static const int args[3][3] = {{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
	                               {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST},
	                               {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST}};
	run(v->prim, 3, args[kind], v->mine);
	if (v->out)
		run(v->out, 2, (int[]){DNNL_ARG_FROM, DNNL_ARG_TO}, (dnnl_memory_t[]){v->mine[result_of(kind)], v->user[result_of(kind)]});
	DNNL(p_dnnl_stream_wait(stream));
}
#endif

/* DPC_CONV=own: dpc's own path for f32 too (to compare the two) */
void rt_cpu_conv(int kind, int elem_bytes, const int64_t *dims, uint64_t x, uint64_t w, uint64_t y, uint64_t ws, int64_t ws_bytes)
{
	RtConvShape s = rt_conv_shape(dims);
#ifdef HAVE_DNNL
	static int use = -1;
	if (use < 0) {
		const char *e = getenv("DPC_CONV");
		use = !(e && !strcmp(e, "own"));
	}
	/* grouped convolutions take dpc's own path */
	if (elem_bytes == 4 && use && s.g == 1 && dnnl_open()) {
		dnnl_conv(kind, dims, &s, x, w, y);
		return;
	}
#endif
	own(kind, elem_bytes, &s, x, w, y, ws, ws_bytes);
}
