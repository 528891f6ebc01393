/* sel's inside: what its three files share (select.h is what others use).
 * model.c evaluates a choice against the cost model select.h describes,
 * whole or as a few changes from a committed choice; search.c holds the
 * searches and the entry points; bound.c the lower bounds. */
#ifndef DPC_SELECT_MODEL_H
#define DPC_SELECT_MODEL_H

#include "select.h"

/* an evaluation's arrays: one per search (and per thread) */
typedef struct {
	const SelProblem *P;
	int *live, nlive; /* the values that are not fixed, in order: the only ones an evaluation visits */
	int *r, *last;    /* per value: where it is computed again (INT_MAX: not), its last use there */
	int **at, *nat, *cap; /* per value computed each time: the positions that need it */
	int64_t *diff;    /* per position + 1 */
	int64_t *made;    /* per position: the bytes of the lasting copies made there so far, in order */
	int64_t *most;    /* per position: the most the copies made there hold at once, in order */
	int *touched, ntouched, cap_touched; /* the positions where copies were made (made and most are zero elsewhere) */
	int *here, cap_here;  /* made_here's scratch */
	int *seen, seen_gen;  /* made_here's: per value, the last call that counted it */
	int *index, *index_gen; /* made_here's: per value, its index in the list of copies, in call seen_gen */
	int *lastread, *lastread_gen; /* made_here's: per value held to there, the last copy there reading it */
	int *cp, *cp_t, ncp, cap_cp; /* eval's copies: values and positions, sorted by position then value */
	int *sorted, cap_sorted, *count; /* copies_by_position's: the copies by position, a count per position */
	int64_t *prof;    /* per position: the memory, base included */
	int64_t budget;   /* what excess is measured over */
	int64_t excess;   /* the last evaluation's bytes times positions above the budget */
	int64_t evals;
	int *lend_from, *lend_at; /* per value: the positions whose op may take its storage (P->lend) */
	unsigned *pos_seen, pos_gen; /* own_needs': per position, the last call that listed it */
	int *merged, cap_merged;     /* own_needs': the runs of positions merged */
	/* per value v, made_here's: its operands neither fixed nor read before by v, op[op_from[v] .. op_from[v + 1]);
	 * of them, those that may give v their storage, their indices into op in take[take_from[v] ..) */
	int *op_from, *op, *take_from, *take;
	struct Base *base;        /* a committed choice that sel_eval_try measures changes from; NULL: none */
	const int *stop;          /* the searches that look end where *stop is set (sel_improve); NULL: never */
} Work;

void sel_work_init(Work *w, const SelProblem *P);
void sel_work_free(Work *w);
/* the peak of keep[]; its FLOPs in *flops; the memory per position in
 * w->prof, and its excess over w->budget in w->excess */
int64_t sel_evaluate(Work *w, const uint8_t *keep, int64_t *flops);
/* keep[] evaluated and made the choice sel_eval_try measures from */
int64_t sel_commit(Work *w, const uint8_t *keep, int64_t *flops);
/* keep[]'s peak, FLOPs and excess exactly as sel_evaluate() finds them,
 * measured from the committed choice where keep[] differs from it in a few values */
int64_t sel_eval_try(Work *w, const uint8_t *keep, int64_t *flops);
/* sel_eval_try where the peak is at most the limit: `limit` where keep[]'s FLOPs are under `fewer`, else
 * `limit_else`; past it, its FLOPs exact and a peak over the limit (not keep[]'s own, nor its excess): a
 * search's move it would not take, laid out no further than that shows */
int64_t sel_eval_under(Work *w, const uint8_t *keep, int64_t limit, int64_t fewer, int64_t limit_else, int64_t *flops);
/* whether the evaluations' test switches (sel_check_tries, sel_try_limits) are as the compiler leaves them */
bool sel_model_defaults(void);
/* keep[], the committed choice but for v now kept: its FLOPs and true where its peak is no higher */
bool sel_keep_try(Work *w, const uint8_t *keep, int v, int64_t *flops);
/* positions where dropping candidate v may free its bytes: after its last
 * forward use, to its last adjoint use (none for a temporary) */
int sel_gap_from(const SelProblem *P, int v);
int sel_gap_to(const SelProblem *P, int v);
/* whether dropping v frees its bytes at t, within its gap */
bool sel_frees(const SelProblem *P, int v, int t);

/* The choices that matter: candidates and temporaries that are not free
 * (a free one made again each time never costs and never holds more), the
 * costliest first, then in order. keep[] starts as store-everything. */
typedef struct {
	int *c, nc;
} Cands;

/* the candidates, the costliest first; keep[] becomes store-everything */
Cands sel_candidates(const SelProblem *P, uint8_t *keep);
/* the least a candidate not kept costs: computed again once, or offloaded */
int64_t sel_least_cost(const SelProblem *P, int v);

/* what an op's result taking candidate v's storage may save at t */
int64_t sel_lent(const SelProblem *P, int v, int t);
/* the sum over each candidate's gap of sign * its bytes, and what ops taking their storage save */
void sel_gaps(const SelProblem *P, const Cands *c, int64_t *at, int sign);
/* the least FLOPs of any fit, where need[t] is what the budget needs freed at t (INT64_MAX: none fits) */
int64_t sel_lower_bound(const SelProblem *P, const Cands *c, const int64_t *need);

#endif
