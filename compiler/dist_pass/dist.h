/* dist: data parallelism's seam in the program. Once the checkpoint pass
 * has fixed the adjoint's shape, a trained parameter's gradient is complete
 * after the last top-level op that writes it, or, for a stacked one whose
 * reverse sweep adds each layer once (acc_slice G[l]), layer by layer; an
 * `allreduce` there lets the runtime sum it across the ranks while the
 * adjoint of the layers below still runs. In one process the runtime does
 * nothing with it. The stream pass drops the allreduce of a parameter it
 * streams: each streamed unit is summed before its update. */
#ifndef DPC_DIST_H
#define DPC_DIST_H

#include "../ir/ir.h"

Program *dist_pass(Program *p);

#endif
