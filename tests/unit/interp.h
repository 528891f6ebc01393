#ifndef INTERP_H
#define INTERP_H
#include "../../compiler/ir/ir.h"

typedef struct {
	Program *p;
	unsigned char *arena;
	int64_t *index;
	int64_t counters[4];
} Interp;

Interp *interp_new(Program *p);
void interp_free(Interp *m);
double *interp_tensor(Interp *m, int v); /* a value's storage in the host arena */
double interp_run(Interp *m, bool backward);
#endif
