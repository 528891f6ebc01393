/* mem: the static memory plan. Every value of a program gets its place:
 * parameters, gradients, optimizer state, inputs, tapes, snapshots and
 * streaming slots in fixed regions of the device arena, every other tensor a
 * slot in the work region for its live range, packed ahead of time; streamed
 * tensors the pinned host pool. The passes that choose by bytes (the
 * checkpoint pass) and the one that decides residency (the stream pass) both
 * ask it; it knows nothing of them. */
#ifndef DPC_MEMPLAN_H
#define DPC_MEMPLAN_H

#include "../ir/ir.h"

/* the points of Program.mem_series that a plan draws */
#define MEM_POINTS 512

/* Lays out p as it stands (Value.res/offset/alias_of; Program.arena_bytes,
 * host_bytes, plan_*; Adam's moments made first where the optimizer needs
 * them) and returns the arena's size. */
int64_t mem_plan(Program *p);
/* the bytes no packing of p's plan goes below: mem_plan's fixed regions and the most bytes its work region
 * holds at once, without packing it (a search's bound); the values' offsets are left unset */
int64_t mem_plan_floor(Program *p);
/* at most mem_plan_floor of p with any choice of its loops' rows dropped, p's rows dropping none: the fixed
 * regions but tapes, slots and ones, and the most bytes live at once outside the loops and in the revolves'
 * untaped bodies (ckpt's rows search) */
int64_t mem_floor_outside(Program *p);
/* Adam's moments and bf16-mixed's master copies and gradient sums, as variables of p: made once, before
 * any search that plans scratch values and takes them back (the checkpoint pass makes them first) */
void mem_optimizer_state(Program *p);
/* The plan of p made again, checked: a compiler bug (die) where it differs
 * in size from the plan p had, or where two tensors of the work region that
 * are live at once share a byte. The driver's verifier runs it on the final
 * plan. */
void mem_verify(Program *p);
/* A lower bound on the device peak that no plan of this model under any
 * keep / recompute / offload choice goes below, computed from p's plan:
 * the parameters, gradients, optimizer state and inputs the device holds
 * for the whole step, plus, at the op where it is most, the working set of
 * one forward or adjoint op (its operands and result, each storage counted
 * once) and what every plan holds across it (the forward's values up to
 * their last forward reader, the adjoint's up to their last reader). */
int64_t mem_peak_bound(Program *p);
/* Value.pitch for every value of p (pitch.c): rows of GEMM operands and results at a whole number of 16
 * bytes where Program.pitch_rows asks and every op that touches them allows; mem_plan runs it first */
void mem_pitch(Program *p);
/* a tensor's bytes in a fixed region, aligned */
int64_t mem_aligned(Program *p, Type t);
/* --emit=stream: the plan's regions, every tensor's place */
void mem_print(FILE *f, Program *p);
/* --emit=memplot: the plan over one step as SVG, with the budget's line (0: none) */
void mem_memplot(FILE *f, Program *p, const char *model);
/* "1.5 MiB" */
const char *mem_bytes_str(int64_t bytes);

#endif
