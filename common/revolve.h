/* rev: the revolve schedules: binomial checkpointing of a loop's reversal
 * (Griewank & Walther), the sweep and pooled-row schedules, their costs,
 * and the copies the host-memory snapshot slots make. The generators are
 * free of the IR (revolve.c: the runtime drives the same code); op.c reads
 * them off an OP_REVOLVE for the compiler's passes. */
#ifndef DPC_REVOLVE_H
#define DPC_REVOLVE_H

#include <stdbool.h>
#include <stdint.h>

/* a + b and a b for a, b >= 0, saturating at INT64_MAX: the counts of long schedules */
static inline int64_t rev_sat_add(int64_t a, int64_t b) { return b > INT64_MAX - a ? INT64_MAX : a + b; }
static inline int64_t rev_sat_mul(int64_t a, int64_t b) { return a && b > INT64_MAX / a ? INT64_MAX : a * b; }

/* Binomial checkpointing (Griewank & Walther, revolve). For a loop of n steps
 * and s snapshot slots, the initial state's slot included: r is the smallest
 * integer with C(s + r, s) >= n, and reversing the loop takes
 * r n - C(s + r, r - 1) forward steps beyond the taped ones, the fewest any
 * schedule with s slots can take. */
int64_t rev_binomial_r(int64_t n, int64_t s);
int64_t rev_binomial_cost(int64_t n, int64_t s);
/* The same when a taped action tapes up to k steps at once (a tape of k
 * rows): r is the smallest with k C(s + r, s) >= n, and the advances number
 * r n - k C(s + r, r - 1). Every step is also taped once, a forward step
 * more. k = 1 is binomial. */
int64_t rev_tape_r(int64_t n, int64_t s, int64_t k);
int64_t rev_tape_cost(int64_t n, int64_t s, int64_t k);
typedef enum {
	REV_ADVANCE,  /* step forward from `step` to `to` without taping */
	REV_SAVE,     /* copy the state at `step` into `slot` */
	REV_RESTORE,  /* make the state in `slot` (the state at `step`) current */
	REV_TAPED,    /* tape the steps `step`..`to` - 1 from the current state, then their adjoints, last first */
	REV_UNTAPE,   /* the adjoints of steps `step`..`to` - 1, last first, whose rows the forward loop taped */
} RevAction;

typedef void (*RevEmit)(void *ctx, RevAction a, int64_t step, int64_t to, int slot);

/* Generates the schedule on the fly: nothing is stored, so n may be in the
 * millions. On entry the state at step 0 is current and held in slot 0.
 * Taped actions span up to k steps. After a taped action the next action
 * is a restore, or there is none. */
void rev_binomial_schedule(int64_t n, int64_t s, int64_t k, RevEmit emit, void *ctx);

/* The sweep schedule (--checkpoint auto): the loss's forward loop saves the
 * state at the start of each of up to s segments, slot i holding segment
 * i's; then the segments are reversed, the rightmost first, each from its
 * slot by the binomial schedule with the s - i slots from its own up. The
 * lengths make every step cost the least more: each segment's cost grows by
 * its r per step, so they are filled in order of r, and the schedule is
 * optimal among those whose first sweep is free (tests/unit/binomial.c
 * checks it against brute force). rev_sweep_segments writes the lengths
 * to len[0..s) and returns how many are in use (the first ones). With taped
 * actions of k steps a segment with s_i slots holds up to k C(s_i + t, s_i)
 * steps that cost t advances or fewer.
 * With a tape of rows the forward loop also tapes its last `tail` steps,
 * rev_sweep_tail(n, ktape) = min(n, ktape) of them: the schedule starts
 * with their adjoints (REV_UNTAPE), and the segments cover the first
 * n - tail steps. Those are the free forward sweep's best: every step but
 * the tail is taped once more, and a longer tail does not fit the rows
 * (tests/unit/binomial.c checks each tail length). */
int64_t rev_sweep_segments(int64_t n, int64_t s, int64_t k, int64_t *len);
int64_t rev_sweep_tail(int64_t n, int64_t ktape);
int64_t rev_sweep_cost(int64_t n, int64_t s, int64_t k, int64_t tail); /* the advances: the sum of the segments' costs */
/* On entry the saves are made and no state is current. */
void rev_sweep_schedule(int64_t n, int64_t s, int64_t k, int64_t tail, RevEmit emit, void *ctx);
/* A revolve's schedule, the sweep's (Op.swept) or binomial's: what the
 * runtime drives, the stream pass replays and --schedule-json lists. */
void rev_schedule(int64_t n, int64_t s, int64_t k, bool sweep, int64_t tail, RevEmit emit, void *ctx);

/* The replays of a state a schedule makes where the rows do not keep it
 * (a revolve's Op.replay): before the adjoint of a taped run's j-th step
 * (from 0), the state is made again from the run's first by j replays of
 * its cheap part: m (m - 1) / 2 for a run of m steps. */
int64_t rev_replays(int64_t n, int64_t s, int64_t k, bool sweep, int64_t tail);

/* Pooled rows (--checkpoint auto, one loop of up to a few thousand steps):
 * the snapshots beyond slot 0 live in the rows of the carried values' tapes,
 * slot i in row k - i, so that rows and snapshots share k rows: with d
 * slots held a taped action has k - (d - 1) rows. The schedule comes from a
 * dynamic programme over (steps, slots held): a reversal of m steps tapes
 * them all when they fit, or advances j and either saves a slot and
 * recurses on the rest or tapes the rest at once, then restores and
 * reverses the j; the loss's forward sweep is free and saves the chain of
 * slots the top level starts from, then tapes its last steps (the tail).
 * rev_pool_plan returns NULL when n^2 (k + 1) passes 2^27; choice holds
 * rev_pool_cells(n, k) entries, what codegen puts in the executable for
 * the runtime. rev_pool_chain writes the top level's segments (start and
 * length; segment i is reversed from slot i) and the tail. */
typedef struct RevPool {
	int64_t n, k;
	int64_t cost;   /* the recomputed steps: advances and taped steps but the tail's */
	int64_t tail;   /* the steps the forward loop tapes */
	int32_t *choice;
} RevPool;
RevPool *rev_pool_plan(int64_t n, int64_t k);
void rev_pool_free(RevPool *pool);
int64_t rev_pool_cells(int64_t n, int64_t k);
int64_t rev_pool_chain(const RevPool *pool, int64_t *starts, int64_t *len, int64_t *tail);
void rev_pool_schedule(const RevPool *pool, RevEmit emit, void *ctx);

/* The copies between device and host a schedule makes when its lowest
 * nhost slots live in host memory and pass through one staging row on the
 * device: saves into them (the initial state's, into slot 0, included), and
 * fetches for the restores whose slot the staging row does not hold already
 * (it holds the host slot last saved or fetched). The runtime's driver,
 * rt_revolve, copies exactly these. For taped actions of one step (k = 1),
 * the only kind a revolve with host slots has. */
void rev_binomial_host(int64_t n, int64_t s, int64_t nhost, int64_t *saves, int64_t *fetches);

/* An OP_REVOLVE's schedule (op.c). */
struct Op;
/* the forward steps an OP_REVOLVE recomputes: its schedule's advances, and
 * with a tape of rows (Op.ktape) the taped actions' forward steps */
int64_t rev_op_cost(const struct Op *revolve);
int64_t rev_op_k(const struct Op *revolve); /* the steps its taped actions span at most: ktape, or 1 */
int64_t rev_op_tail(const struct Op *revolve); /* the steps its forward loop tapes: with a tape of rows, min(n, ktape), or the pool's */
void rev_op_schedule(const struct Op *revolve, RevEmit emit, void *ctx); /* the pool's schedule, or rev_schedule's */
/* the forward steps of a loop of v's trip count and tape with s slots and taped actions of k steps,
 * swept or binomial */
int64_t rev_op_steps(const struct Op *v, int64_t s, int64_t k, bool sweep);
/* the position in `ops` (n of them) from which the OP_REVOLVE ops[i]'s snapshots hold something: its
 * forward loop's, where that loop saves the segments' starts (Op.sweep), or i; to the revolve's end */
int rev_op_held_from(struct Op *const *ops, int n, int i);
/* A revolve whose state is replayed (Op.replay): what a replay of step i from row irow does with each op
 * of its taped body (body3), into mark[0..body3.len): skips it, runs it, or loads its value from the row
 * that keeps it (mark may be NULL: the FLOPs alone). The ops run are those the next state needs (of the carried values the adjoint reads,
 * rev_replay_state) that no kept row holds. Returns the FLOPs of
 * one replay, or -1 where the state cannot be replayed so: an op it needs is a GEMM, a convolution, a
 * transfer, a loop, or reads a variable other than the state, the parameters and the inputs. */
enum { REPLAY_SKIP, REPLAY_RUN, REPLAY_LOAD };
struct Program;
int64_t rev_replay_marks(const struct Program *p, const struct Op *v, unsigned char *mark);
/* whether v's carried value c is one its adjoint reads, which a row of its tape keeps: what a replay
 * makes again (the others are not needed, nor made) */
bool rev_replay_state(const struct Op *v, int c);
/* the replays of one step a revolve's schedule makes (0 unless Op.replay): before the adjoint of the step
 * j places into a taped run, the state is made again from the run's first row by j replays */
int64_t rev_op_replays(const struct Op *v);

#endif
