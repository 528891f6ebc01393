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
 * positions), then one GEMM per band (rt_cpu_gemm: OpenBLAS on tiles
 * the device's threads share). bf16 is widened to f32 first
 * and the result rounded back, as bf16 GEMMs are. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onednn.h"


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
#define OWN(T, ELEM)                                                                                          \
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
						rt_cpu_gemm(ELEM, true, false, K, Q, O, wg, K, 0, yb, P, 0, cols, Q, 0, 1, 0);           \
						fold_##T(s, nc, cols, xg, i0, nr);                                                   \
						continue;                                                                            \
					}                                                                                        \
					unfold_##T(s, nc, xg, cols, i0, nr);                                                     \
					if (kind == 0)                                                                           \
						rt_cpu_gemm(ELEM, false, false, O, Q, K, wg, K, 0, cols, Q, 0, yb, P, 0, 1, 0);          \
					else                                                                                     \
						rt_cpu_gemm(ELEM, false, true, O, K, Q, yb, P, 0, cols, Q, 0, wg, K, 0, 1, n || i0);     \
				}                                                                                            \
		}                                                                                                    \
	}
OWN(float, 4)
OWN(double, 8)

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

#ifdef HAVE_DNNL

/* A convolution's work comes in pieces of `per` images, about CONV_GRAIN
 * FLOPs each: per is the largest divisor of the batch within that, so
 * that one primitive serves every piece. The pieces come from the shape
 * alone; each runs on one thread. (Pieces of 2^23 FLOPs made ResNet's step
 * 8% slower on one thread: oneDNN on one or two images, and a weights'
 * gradient of each piece to sum.) */
enum { CONV_GRAIN = 1 << 25 };

/* one piece's memories: x and y, as the caller has them (user: NCHW, the
 * piece's images) and as oneDNN wants them (mine; == user where they
 * agree); for the weights' gradient, the piece's own (w); and its own
 * scratchpad. The pieces run at once on the device's threads with one
 * primitive: oneDNN's scratchpad of its own would be one for all of them
 * (a 1x1 convolution of stride 2 gathers its input there, and the pieces
 * overwrote each other's), so each piece passes its own. */
typedef struct {
	dnnl_memory_t user[3], mine[3];
	dnnl_memory_t scratch; /* NULL when the primitive needs none */
} Piece;

/* One convolution's primitive for one kind, the reorders to and from the
 * layouts oneDNN chose, and its pieces' memories; the weights (shared by
 * the pieces of kinds 0 and 1) as the caller has them and reordered. */
typedef struct {
	int kind;
	int64_t dims[RT_CONV_DIMS];
	int64_t per, pieces;
	dnnl_primitive_t prim;
	dnnl_primitive_t in[3], out; /* reorders: the operands in, the result out */
	dnnl_memory_t wuser, wmine;  /* the weights (kinds 0 and 1), or the gradient the pieces sum into (kind 2) */
	size_t wbytes;               /* of wmine */
	Piece *piece;
} Conv;

static Conv *convs;
static int nconvs;

static void md(dnnl_memory_desc_t *m, int64_t a, int64_t b, int64_t c, int64_t d, dnnl_format_tag_t tag)
{
	dnnl_dims_t dims = {a, b, c, d};
	DNNL(p_dnnl_memory_desc_init_by_tag(m, 4, dims, dnnl_f32, tag));
}

/* primitives whose scratchpad the caller passes (DNNL_ARG_SCRATCHPAD) */
static const_dnnl_primitive_attr_t user_scratchpad(void)
{
	static dnnl_primitive_attr_t attr;
	if (!attr) {
		DNNL(p_dnnl_primitive_attr_create(&attr));
		DNNL(p_dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
	}
	return attr;
}

/* the scratchpad pd needs, or 0 */
static size_t scratch_bytes(const_dnnl_primitive_desc_t pd)
{
	const dnnl_memory_desc_t *m = p_dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	return m ? p_dnnl_memory_desc_get_size(m) : 0;
}

/* a reorder, which the pieces also run at once: one that needs a scratchpad would share it */
static dnnl_primitive_t reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t r;
	DNNL(p_dnnl_reorder_primitive_desc_create(&pd, from, rt_dnnl_engine, to, rt_dnnl_engine, user_scratchpad()));
	if (scratch_bytes(pd))
		rt_fail(70, "internal error: a oneDNN reorder of a convolution's operand needs a scratchpad");
	DNNL(p_dnnl_primitive_create(&r, pd));
	DNNL(p_dnnl_primitive_desc_destroy(pd));
	return r;
}

/* the images of a piece: the largest divisor of n with at most CONV_GRAIN FLOPs (at least 1) */
static int64_t images_per_piece(const RtConvShape *s)
{
	double image = 2.0 * (double)(s->o * s->ho * s->wo) * (double)(s->c / s->g * s->kh * s->kw);
	int64_t per = 1;
	for (int64_t d = 2; d <= s->n; d++)
		if (s->n % d == 0 && image * (double)d <= CONV_GRAIN)
			per = d;
	return per;
}

/* the primitive descriptor of one kind, for a piece of `per` images */
static dnnl_primitive_desc_t conv_desc(int kind, const RtConvShape *s, int64_t per, dnnl_memory_desc_t *um)
{
	dnnl_memory_desc_t any[3];
	int64_t shape[3][4] = {{per, s->c, s->h, s->w}, {s->o, s->c, s->kh, s->kw}, {per, s->o, s->ho, s->wo}};
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
	DNNL(p_dnnl_primitive_desc_create(&fwd, &fd, user_scratchpad(), rt_dnnl_engine, NULL));
	if (kind == 0)
		return fwd;
	if (kind == 1)
		DNNL(p_dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &any[0], &any[1], &any[2], strides,
		                                                         dil, pad, padr));
	else
		DNNL(p_dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &any[0], &any[1], NULL, &any[2],
		                                                            strides, dil, pad, padr));
	DNNL(p_dnnl_primitive_desc_create(&pd, &cd, user_scratchpad(), rt_dnnl_engine, fwd));
	DNNL(p_dnnl_primitive_desc_destroy(fwd));
	return pd;
}

/* a memory of oneDNN's own for layout m, or NULL where the caller's um agrees (and always for a gradient of w) */
static dnnl_memory_t own_memory(const dnnl_memory_desc_t *m, const dnnl_memory_desc_t *um, bool always)
{
	dnnl_memory_t mem = NULL;
	if (always || !p_dnnl_memory_desc_equal(m, um))
		DNNL(p_dnnl_memory_create(&mem, m, rt_dnnl_engine, DNNL_MEMORY_ALLOCATE));
	return mem;
}

static Conv *conv_for(int kind, const int64_t *d, const RtConvShape *s)
{
	for (int i = 0; i < nconvs; i++)
		if (convs[i].kind == kind && !memcmp(convs[i].dims, d, sizeof convs[i].dims))
			return &convs[i];
	rt_dnnl_stream(); /* this thread's oneDNN on one thread before the primitive is made */
	convs = rt_host_grow(convs, (int64_t)sizeof *convs * (nconvs + 1), "a convolution");
	Conv *v = &convs[nconvs++];
	memset(v, 0, sizeof *v);
	v->kind = kind;
	memcpy(v->dims, d, sizeof v->dims);
	v->per = images_per_piece(s);
	v->pieces = s->n / v->per;
	dnnl_memory_desc_t um[3];
	dnnl_primitive_desc_t pd = conv_desc(kind, s, v->per, um);
	DNNL(p_dnnl_primitive_create(&v->prim, pd));
	static const dnnl_query_t q[3][3] = {{dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
	                                     {dnnl_query_diff_src_md, dnnl_query_weights_md, dnnl_query_diff_dst_md},
	                                     {dnnl_query_src_md, dnnl_query_diff_weights_md, dnnl_query_diff_dst_md}};
	const dnnl_memory_desc_t *m[3];
	for (int i = 0; i < 3; i++)
		m[i] = p_dnnl_primitive_desc_query_md(pd, q[kind][i], 0);
	int r = result_of(kind);
	for (int i = 0; i < 3; i++)
		if (!p_dnnl_memory_desc_equal(m[i], &um[i]))
			*(i == r ? &v->out : &v->in[i]) = i == r ? reorder(m[i], &um[i]) : reorder(&um[i], m[i]);
	/* the weights: shared by the pieces, or (kind 2) the sum of theirs */
	DNNL(p_dnnl_memory_create(&v->wuser, &um[1], rt_dnnl_engine, DNNL_MEMORY_NONE));
	v->wmine = own_memory(m[1], &um[1], kind == 2);
	v->wbytes = p_dnnl_memory_desc_get_size(m[1]);
	v->piece = rt_host_alloc((int64_t)sizeof *v->piece * v->pieces, "a convolution's pieces");
	for (int64_t p = 0; p < v->pieces; p++) {
		Piece *c = &v->piece[p];
		for (int i = 0; i < 3; i += 2) {
			DNNL(p_dnnl_memory_create(&c->user[i], &um[i], rt_dnnl_engine, DNNL_MEMORY_NONE));
			c->mine[i] = own_memory(m[i], &um[i], false);
		}
		c->user[1] = NULL;
		c->mine[1] = kind == 2 ? own_memory(m[1], &um[1], true) : NULL;
		c->scratch = NULL;
		if (scratch_bytes(pd))
			DNNL(p_dnnl_memory_create(&c->scratch, p_dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0),
			                          rt_dnnl_engine, DNNL_MEMORY_ALLOCATE));
	}
	DNNL(p_dnnl_primitive_desc_destroy(pd));
	return v;
}

static void run(dnnl_primitive_t p, int n, const int *arg, dnnl_memory_t *mem)
{
	dnnl_exec_arg_t a[4];
	for (int i = 0; i < n; i++)
		a[i] = (dnnl_exec_arg_t){arg[i], mem[i]};
	dnnl_stream_t stream = rt_dnnl_stream();
	DNNL(p_dnnl_primitive_execute(p, stream, n, a));
	DNNL(p_dnnl_stream_wait(stream));
}

static void move(dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to)
{
	run(r, 2, (int[]){DNNL_ARG_FROM, DNNL_ARG_TO}, (dnnl_memory_t[]){from, to});
}

typedef struct {
	Conv *v;
	const RtConvShape *s;
	float *x, *y;
} Call;

/* one piece: its images of x and y in, the convolution, its result out */
static void conv_piece(void *arg, int64_t p)
{
	const Call *k = arg;
	Conv *v = k->v;
	Piece *c = &v->piece[p];
	int kind = v->kind, r = result_of(kind);
	float *at[3] = {k->x + p * v->per * k->s->c * k->s->h * k->s->w, NULL, k->y + p * v->per * k->s->o * k->s->ho * k->s->wo};
	dnnl_memory_t use[3];
	for (int i = 0; i < 3; i += 2) {
		DNNL(p_dnnl_memory_set_data_handle(c->user[i], at[i]));
		use[i] = c->mine[i] ? c->mine[i] : c->user[i];
		if (i != r && c->mine[i])
			move(v->in[i], c->user[i], c->mine[i]);
	}
	use[1] = kind == 2 ? c->mine[1] : v->wmine ? v->wmine : v->wuser;
	static const int args[3][4] = {{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD},
	                               {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST, DNNL_ARG_SCRATCHPAD},
	                               {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST, DNNL_ARG_SCRATCHPAD}};
	dnnl_memory_t with[4] = {use[0], use[1], use[2], c->scratch};
	run(v->prim, c->scratch ? 4 : 3, args[kind], with);
	if (r != 1 && c->mine[r])
		move(v->out, c->mine[r], c->user[r]);
}

/* the weights' gradient: the pieces' own, summed in their order into wmine,
 * SUM_SPAN elements at a time on the device's threads */
enum { SUM_SPAN = 4096 };

typedef struct {
	float *sum;
	const float **part;
	int64_t n, pieces;
} Sum;

static void sum_span(void *arg, int64_t span)
{
	const Sum *a = arg;
	int64_t lo = span * SUM_SPAN, hi = lo + SUM_SPAN < a->n ? lo + SUM_SPAN : a->n;
	memcpy(a->sum + lo, a->part[0] + lo, sizeof(float) * (size_t)(hi - lo));
	for (int64_t p = 1; p < a->pieces; p++)
		for (int64_t i = lo; i < hi; i++)
			a->sum[i] += a->part[p][i];
}

static float *sum_pieces(Conv *v)
{
	Sum a = {NULL, rt_host_alloc((int64_t)sizeof(float *) * v->pieces, "a convolution's pieces"),
	         (int64_t)(v->wbytes / sizeof(float)), v->pieces};
	DNNL(p_dnnl_memory_get_data_handle(v->wmine, (void **)&a.sum));
	for (int64_t p = 0; p < v->pieces; p++)
		DNNL(p_dnnl_memory_get_data_handle(v->piece[p].mine[1], (void **)&a.part[p]));
	rt_cpu_parallel((a.n + SUM_SPAN - 1) / SUM_SPAN, sum_span, &a);
	free(a.part);
	return a.sum;
}

static void dnnl_conv(int kind, const int64_t *d, const RtConvShape *s, uint64_t x, uint64_t w, uint64_t y)
{
	Conv *v = conv_for(kind, d, s);
	DNNL(p_dnnl_memory_set_data_handle(v->wuser, P(w)));
	if (kind != 2 && v->wmine)
		move(v->in[1], v->wuser, v->wmine);
	Call k = {v, s, P(x), P(y)};
	rt_cpu_parallel(v->pieces, conv_piece, &k);
	if (kind != 2)
		return;
	float *sum = sum_pieces(v);
	if (v->out)
		move(v->out, v->wmine, v->wuser);
	else
		memcpy(P(w), sum, v->wbytes);
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
	if (elem_bytes == 4 && use && s.g == 1 && rt_dnnl_open()) {
		dnnl_conv(kind, dims, &s, x, w, y);
		return;
	}
#endif
	own(kind, elem_bytes, &s, x, w, y, ws, ws_bytes);
}
