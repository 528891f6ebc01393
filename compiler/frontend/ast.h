/* The frontend's private AST, shared by parse.c and lower.c. */
#ifndef DPC_FE_AST_H
#define DPC_FE_AST_H

#include <string.h>

#include "fe.h"

typedef enum {
	N_NUM, N_NAME, N_BIN, N_NEG, N_CALL, N_INDEX, N_LIST, N_RANGE, /* expressions; N_RANGE only as a subscript */
	N_LET, N_ASSIGN, N_FOR, N_RETURN, N_REPORT, N_UPDATE, /* statements */
} NodeKind;

typedef struct Node Node;
typedef Vec(Node *) NodeList;

struct Node {
	NodeKind kind;
	Loc loc;
	char op;             /* N_BIN: + - * / @ < > and l g = ! for <= >= == != (fe_binop) */
	double num;          /* N_NUM */
	const char *name;    /* N_NAME, N_CALL, N_LET, N_ASSIGN, N_FOR (loop variable) */
	Node *a, *b;         /* N_BIN operands, N_NEG / N_LET / N_ASSIGN / N_RETURN value, N_INDEX base and index, N_RANGE ends (NULL: left out) */
	NodeList args;       /* N_CALL arguments, N_LIST elements, N_FOR body, N_INDEX subscripts (when not one index in b) */
	const char **argname;/* N_CALL: per argument, NULL or the name of `axis=1` */
	int64_t lo, hi;      /* N_FOR range */
};

typedef struct {
	const char *name;
	int64_t value;
	Loc loc;
} Const;

typedef struct {
	const char *name;
	Loc loc;
	Vec(const char *) pnames;
	Vec(Type) ptypes;
	Vec(Loc) plocs;
	Type ret;
	NodeList body;
} Fn;

struct FeAst {
	const char *file;
	Vec(Const) consts;
	Vec(Param) params;
	Vec(Input) inputs;
	Vec(Fn) fns;
	const char *weights;     /* `weights "FILE"`: the file the executable starts from, as written */
	Loc weights_loc;
	NodeList loss;
	Loc loss_loc;
	bool has_loss;
	Map declared;            /* every top-level name */
	Map const_index, fn_index; /* name -> index in consts, fns */
};

/* Integer constants stay within +-2^40, so that nothing computed from them
 * overflows. */
#define MAX_CONST ((int64_t)1 << 40)

/* A chain a + b - c is a left spine of N_BIN nodes: the walks over it loop
 * instead of recursing, which a long sum would exhaust. Fills spine, root
 * first, and returns the operand at its bottom. */
static inline Node *fe_left_spine(Node *n, NodeList *spine)
{
	for (; n->kind == N_BIN; n = n->a)
		vec_push(spine, n);
	return n;
}

/* a binary operator's code in Node.op, and back */
static inline char fe_binop(const char *text)
{
	static const char *two[] = {"<=", ">=", "==", "!="};
	for (int i = 0; i < 4; i++)
		if (!strcmp(text, two[i]))
			return "lg=!"[i];
	return text[0];
}

static inline const char *fe_binop_text(char op)
{
	switch (op) {
	case 'l': return "<=";
	case 'g': return ">=";
	case '=': return "==";
	case '!': return "!=";
	case '+': return "+";
	case '-': return "-";
	case '*': return "*";
	case '/': return "/";
	case '@': return "@";
	case '<': return "<";
	default: return ">";
	}
}

static inline Const *fe_const(FeAst *a, const char *name)
{
	int i = map_get(&a->const_index, name);
	return i >= 0 ? &a->consts.data[i] : NULL;
}

static inline Fn *fe_fn(FeAst *a, const char *name)
{
	int i = map_get(&a->fn_index, name);
	return i >= 0 ? &a->fns.data[i] : NULL;
}

#endif
