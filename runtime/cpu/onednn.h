/* rt: oneDNN on the CPU device, opened at run time (onednn.c). The CPU
 * device's convolutions (conv.c) and f32 GEMMs (device.c) run on it where
 * it is installed; each call on one thread, inside the pieces the device's
 * own threads share. */
#ifndef DPRT_ONEDNN_H
#define DPRT_ONEDNN_H

#include "cpu.h"

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define HAVE_DNNL 1

#define DNNL_FNS(X) X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_stream_wait) X(dnnl_memory_desc_init_by_tag) \
	X(dnnl_dilated_convolution_forward_desc_init) X(dnnl_dilated_convolution_backward_data_desc_init) \
	X(dnnl_dilated_convolution_backward_weights_desc_init) X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_query_md) \
	X(dnnl_primitive_create) X(dnnl_primitive_execute) X(dnnl_memory_create) X(dnnl_memory_set_data_handle) \
	X(dnnl_memory_get_data_handle) X(dnnl_memory_desc_get_size) X(dnnl_memory_desc_equal) \
	X(dnnl_reorder_primitive_desc_create) X(dnnl_primitive_desc_destroy) X(dnnl_sgemm) \
	X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_set_scratchpad_mode)
#define DNNL_DECLARE(f) extern __typeof__(&f) p_##f;
DNNL_FNS(DNNL_DECLARE)
#undef DNNL_DECLARE

extern dnnl_engine_t rt_dnnl_engine;

/* opens oneDNN once (a warning where it cannot); true when it is open */
bool rt_dnnl_open(void);
/* the calling thread's stream; its first call sets this thread's oneDNN to
 * run on this thread alone (before it makes or runs a primitive) */
dnnl_stream_t rt_dnnl_stream(void);

#define DNNL(call) do { \
	dnnl_status_t s_ = (call); \
	if (s_ != dnnl_success) \
		rt_fail(1, "%s:%d: %s failed: oneDNN status %d", __FILE__, __LINE__, #call, (int)s_); \
} while (0)
#endif

#endif
