/* The constants of the contract between the code dpc generates and the
 * runtime (runtime/dprt.h declares the calls): the counters, the phases,
 * a fused revolve's action words, the GEMM and convolution arguments, the
 * most parameters and inputs. The compiler includes this, not dprt.h. */
#ifndef DPC_ABI_H
#define DPC_ABI_H

#include <stdint.h>

enum {
	RT_COUNT_FORWARD = 0,   /* a loop body computed in a forward sweep */
	RT_COUNT_RECOMPUTED = 1,/* a loop body computed again to rebuild state */
	RT_COUNT_FLOPS = 2,     /* FLOPs of straight-line ops computed again in the adjoint */
};

enum { RT_PHASE_FORWARD, RT_PHASE_BACKWARD }; /* rt_phase: where dp_step has got to, for --trace */

/* A fused revolve's action word: the RevAction in the top bits, then a
 * count of steps (or a slot) of RT_ACTION_FIELD bits, then the first step
 * of RT_ACTION_STEP bits. */
enum { RT_ACTION_STEP = 31, RT_ACTION_FIELD = 29, RT_ACTION_KIND = RT_ACTION_STEP + RT_ACTION_FIELD };
#define RT_ACTION_WORD(a, field, step) \
	((uint64_t)(a) << RT_ACTION_KIND | (uint64_t)(field) << RT_ACTION_STEP | (uint64_t)(step))

/* rt_gemm's elem_bytes for A and B in bf16 and C in f32 (attention's scores) */
#define RT_GEMM_BF16_F32 3

/* rt_gemm_ep's epilogues (dprt.h), and their names in labels (--profile, --emit=kernels) */
enum { RT_EP_BIAS = 1, RT_EP_GELU_BIAS, RT_EP_DGELU, RT_EP_BGRAD };
#define RT_EP_NAMES {"", "+bias", "+gelu_bias", "+dgelu", "+bgrad"}

/* rt_conv's dims, in this order */
enum {
	RT_CONV_N, RT_CONV_C, RT_CONV_H, RT_CONV_W, RT_CONV_O, RT_CONV_HO, RT_CONV_WO, RT_CONV_KH, RT_CONV_KW,
	RT_CONV_SH, RT_CONV_SW, RT_CONV_PH, RT_CONV_PW, RT_CONV_DH, RT_CONV_DW, RT_CONV_G, RT_CONV_DIMS
};
/* the most parameters (and buffers) and inputs a model has: codegen refuses more */
#define RT_MAX_PARAMS 4096
#define RT_MAX_INPUTS 64

#endif
