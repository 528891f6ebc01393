/* fe: lexer and recursive-descent parser. Constant expressions (dims, loop
 * bounds, const declarations) are evaluated here, so the AST holds numbers. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

typedef enum { T_EOF, T_IDENT, T_INT, T_FLOAT, T_PUNCT, T_STRING } TokKind;

typedef struct {
	TokKind kind;
	Loc loc;
	const char *s; /* start in the source */
	int len;
	int64_t ival;
	double fval;
} Tok;

typedef struct {
	const char *file, *src, *p;
	int line, col;
	Tok tok, next;
	FeAst *ast;
	const FeDefine *defs;
	int ndefs;
	bool *used_def;
	int depth;       /* parentheses, brackets, calls, indices, unary minus and blocks now open */
} Parser;

/* Parsing and lowering recurse once per level, so the nesting is bounded
 * (clang stops at 256 bracket levels too). */
#define MAX_NEST 256
/* Source files are read whole: bound them, so that `dpc /dev/zero` stops. */
#define MAX_SOURCE ((size_t)64 << 20)

static const char *puncts[] = {"..", "->", "<=", ">=", "==", "!=", "(", ")", "[", "]", "{", "}", ",", ":", "=", "<", ">", "+", "-", "*", "/", "@", "%", ";"};

static Loc here(Parser *P) { return (Loc){P->file, P->line, P->col}; }

static void advance(Parser *P, int n)
{
	while (n-- > 0) {
		if (*P->p == '\n')
			P->line++, P->col = 1;
		else
			P->col++;
		P->p++;
	}
}

static void skip_space(Parser *P)
{
	for (;;) {
		char c = *P->p;
		if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			advance(P, 1);
		} else if (c == '#') {
			while (*P->p && *P->p != '\n')
				advance(P, 1);
		} else if (c == '/' && P->p[1] == '*') {
			Loc start = here(P);
			advance(P, 2);
			while (*P->p && !(P->p[0] == '*' && P->p[1] == '/'))
				advance(P, 1);
			if (!*P->p)
				diag_error(start, "unterminated comment: this /* has no */");
			advance(P, 2);
		} else {
			return;
		}
	}
}

static Tok lex(Parser *P)
{
	skip_space(P);
	Tok t = {0};
	t.loc = here(P);
	t.s = P->p;
	char c = *P->p;
	if (!c) {
		t.kind = T_EOF;
		return t;
	}
	if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
		const char *q = P->p;
		while (*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9'))
			q++;
		t.kind = T_IDENT;
		t.len = (int)(q - P->p);
		advance(P, t.len);
		return t;
	}
	if (c >= '0' && c <= '9') {
		const char *q = P->p;
		while (*q >= '0' && *q <= '9')
			q++;
		bool fl = false;
		if (*q == '.' && q[1] >= '0' && q[1] <= '9') {
			fl = true;
			q++;
			while (*q >= '0' && *q <= '9')
				q++;
		}
		if ((*q == 'e' || *q == 'E') && ((q[1] >= '0' && q[1] <= '9') || ((q[1] == '-' || q[1] == '+') && q[2] >= '0' && q[2] <= '9'))) {
			fl = true;
			q += 2;
			while (*q >= '0' && *q <= '9')
				q++;
		}
		if (*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))
			diag_error(t.loc, "malformed number '%.*s'", (int)(q - P->p + 1), P->p);
		t.len = (int)(q - P->p);
		char *buf = ar_strndup(P->p, (size_t)t.len);
		errno = 0;
		if (fl) {
			t.kind = T_FLOAT;
			t.fval = strtod(buf, NULL);
			if (errno || !isfinite(t.fval))
				diag_error(t.loc, "number '%s' is out of range", buf);
		} else {
			t.kind = T_INT;
			t.ival = strtoll(buf, NULL, 10);
			if (errno)
				diag_error(t.loc, "integer '%s' is too large", buf);
			t.fval = (double)t.ival;
		}
		advance(P, t.len);
		return t;
	}
	/* a string: a file or a tensor's name in a weights file; printable, no spaces, quotes or escapes,
	 * since the model description holds it as one word */
	if (c == '"') {
		const char *q = P->p + 1;
		while (*q > ' ' && *q < 0x7f && *q != '"')
			q++;
		if (*q != '"')
			diag_error(t.loc, *q == ' ' ? "a string cannot hold a space" : "unterminated string: expected '\"' on this line");
		t.kind = T_STRING;
		t.len = (int)(q + 1 - P->p);
		advance(P, t.len);
		return t;
	}
	for (size_t i = 0; i < sizeof puncts / sizeof *puncts; i++) {
		size_t n = strlen(puncts[i]);
		if (strncmp(P->p, puncts[i], n) == 0) {
			t.kind = T_PUNCT;
			t.len = (int)n;
			advance(P, (int)n);
			return t;
		}
	}
	if ((unsigned char)c >= 0x80 || c < 0x20)
		diag_error(t.loc, "unexpected byte 0x%02x", (unsigned char)c);
	diag_error(t.loc, "unexpected character '%c'", c);
}

static void next(Parser *P)
{
	P->tok = P->next;
	P->next = lex(P);
}

static bool is(Tok t, const char *s) { return (int)strlen(s) == t.len && strncmp(t.s, s, (size_t)t.len) == 0 && t.kind != T_EOF; }

static const char *tok_str(Tok t)
{
	if (t.kind == T_EOF)
		return "end of file";
	return ar_printf("'%.*s'", t.len, t.s);
}

static bool accept(Parser *P, const char *s)
{
	if (P->tok.kind != T_EOF && is(P->tok, s) && P->tok.kind != T_INT && P->tok.kind != T_FLOAT) {
		next(P);
		return true;
	}
	return false;
}

static Tok expect(Parser *P, const char *s, const char *what)
{
	Tok t = P->tok;
	if (!accept(P, s))
		diag_error(t.loc, "expected '%s' %s, found %s", s, what, tok_str(t));
	return t;
}

static const char *keywords[] = {"const", "param", "buffer", "input", "fn", "loss", "let", "for", "in", "return", "report", "update"};

static bool is_keyword(Tok t)
{
	for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
		if (is(t, keywords[i]))
			return true;
	return false;
}

static const char *ident(Parser *P, const char *what)
{
	Tok t = P->tok;
	if (t.kind != T_IDENT || is_keyword(t))
		diag_error(t.loc, "expected %s, found %s", what, tok_str(t));
	next(P);
	return ar_strndup(t.s, (size_t)t.len);
}

/* a string token's text, without its quotes */
static const char *string(Parser *P, const char *what)
{
	Tok t = P->tok;
	if (t.kind != T_STRING)
		diag_error(t.loc, "expected %s in quotes, found %s", what, tok_str(t));
	if (t.len == 2)
		diag_error(t.loc, "%s is empty", what);
	next(P);
	return ar_strndup(t.s + 1, (size_t)t.len - 2);
}

static void nest(Parser *P, Loc loc, const char *what)
{
	if (++P->depth > MAX_NEST)
		diag_error(loc, "%s nested too deeply (more than %d levels of parentheses, brackets, calls, indices, "
		           "unary minus and blocks)", what, MAX_NEST);
}

static void unnest(Parser *P, int n) { P->depth -= n; }

static Node *node(NodeKind k, Loc loc)
{
	Node *n = ar_alloc(sizeof *n);
	n->kind = k;
	n->loc = loc;
	return n;
}

/* ---- constant expressions ---- */

static Const *find_const(FeAst *a, const char *name) { return fe_const(a, name); }

static int64_t const_expr(Parser *P);

static int64_t check_range(Loc loc, int64_t v)
{
	if (v > MAX_CONST || v < -MAX_CONST)
		diag_error(loc, "constant %lld is too large (limit 2^40)", (long long)v);
	return v;
}

static int64_t const_atom(Parser *P)
{
	Tok t = P->tok;
	if (accept(P, "(")) {
		nest(P, t.loc, "constant expression");
		int64_t v = const_expr(P);
		expect(P, ")", "to close the parenthesis");
		unnest(P, 1);
		return v;
	}
	if (accept(P, "-")) {
		nest(P, t.loc, "constant expression");
		int64_t v = -const_atom(P);
		unnest(P, 1);
		return v;
	}
	if (t.kind == T_INT) {
		next(P);
		return check_range(t.loc, t.ival);
	}
	if (t.kind == T_FLOAT)
		diag_error(t.loc, "expected an integer constant, found %s", tok_str(t));
	if (t.kind == T_IDENT && !is_keyword(t)) {
		const char *name = ident(P, "a constant");
		Const *c = find_const(P->ast, name);
		if (!c)
			diag_error(t.loc, "'%s' is not a constant declared before this point", name);
		return c->value;
	}
	diag_error(t.loc, "expected an integer constant, found %s", tok_str(t));
}

static int64_t const_term(Parser *P)
{
	int64_t v = const_atom(P);
	for (;;) {
		Tok t = P->tok;
		if (accept(P, "*")) {
			int64_t r = const_atom(P);
			if (v != 0 && (llabs(r) > MAX_CONST * 2 / (llabs(v) ? llabs(v) : 1)))
				diag_error(t.loc, "constant expression overflows");
			v = check_range(t.loc, v * r);
		} else if (accept(P, "/") || accept(P, "%")) {
			int64_t r = const_atom(P);
			if (r == 0)
				diag_error(t.loc, "division by zero in a constant expression");
			v = *t.s == '/' ? v / r : v % r;
		} else {
			return v;
		}
	}
}

static int64_t const_expr(Parser *P)
{
	int64_t v = const_term(P);
	for (;;) {
		Tok t = P->tok;
		if (accept(P, "+"))
			v = check_range(t.loc, v + const_term(P));
		else if (accept(P, "-"))
			v = check_range(t.loc, v - const_term(P));
		else
			return v;
	}
}

static int64_t dim_expr(Parser *P)
{
	Loc loc = P->tok.loc;
	int64_t v = const_expr(P);
	if (v < 1)
		diag_error(loc, "a dimension must be at least 1, this one is %lld", (long long)v);
	return v;
}

/* A tensor's element count stays below 2^40, so that sizes never overflow. */
static Type check_size(Loc loc, Type t)
{
	int64_t n = 1;
	for (int i = 0; i < t.rank; i++) {
		if (t.dim[i] > MAX_CONST / n)
			diag_error(loc, "tensor %s is too large (more than 2^40 elements)", ir_type_str(t));
		n *= t.dim[i];
	}
	return t;
}

static Type parse_type_dims(Parser *P, int *stacked);

/* f32[D, H], f32[L][H, H], i32[B], f32[] */
static Type parse_type(Parser *P, int *stacked)
{
	Loc loc = P->tok.loc;
	return check_size(loc, parse_type_dims(P, stacked));
}

/* One bracketed dimension list, appended to ty. */
static void dim_list(Parser *P, Type *ty)
{
	expect(P, "[", "to open the shape");
	if (!is(P->tok, "]")) {
		do {
			if (ty->rank == IR_MAXRANK)
				diag_error(P->tok.loc, "too many dimensions (at most %d)", IR_MAXRANK);
			ty->dim[ty->rank++] = dim_expr(P);
		} while (accept(P, ","));
	}
	expect(P, "]", "to close the shape");
}

static Type parse_type_dims(Parser *P, int *stacked)
{
	Tok t = P->tok;
	DType dt;
	if (is(t, "f32"))
		dt = DT_F32;
	else if (is(t, "bf16"))
		dt = DT_BF16;
	else if (is(t, "f64"))
		dt = DT_F64;
	else if (is(t, "i32"))
		dt = DT_I32;
	else
		diag_error(t.loc, "expected a type (f32[...], bf16[...], f64[...] or i32[...]), found %s", tok_str(t));
	next(P);
	Type ty = {dt, 0, {0}};
	if (stacked)
		*stacked = 0;
	dim_list(P, &ty);
	if (is(P->tok, "[")) {
		/* f32[L][H, H]: one leading stack axis */
		if (!stacked)
			diag_error(P->tok.loc, "stacked types such as f32[L][H, H] are only for params and inputs");
		if (ty.rank != 1)
			diag_error(t.loc, "the stack axis of a stacked type is one dimension, as in f32[L][H, H]");
		*stacked = 1;
		dim_list(P, &ty);
	}
	return ty;
}

/* ---- expressions ---- */

static Node *expr(Parser *P);

static Node *primary(Parser *P)
{
	Tok t = P->tok;
	if (t.kind == T_INT || t.kind == T_FLOAT) {
		next(P);
		Node *n = node(N_NUM, t.loc);
		n->num = t.fval;
		return n;
	}
	if (accept(P, "(")) {
		nest(P, t.loc, "expression");
		Node *n = expr(P);
		expect(P, ")", "to close the parenthesis");
		unnest(P, 1);
		return n;
	}
	if (accept(P, "[")) {
		nest(P, t.loc, "expression");
		Node *n = node(N_LIST, t.loc);
		if (!is(P->tok, "]"))
			do
				vec_push(&n->args, expr(P));
			while (accept(P, ","));
		expect(P, "]", "to close the list");
		unnest(P, 1);
		return n;
	}
	if (t.kind == T_IDENT && !is_keyword(t)) {
		Node *n = node(N_NAME, t.loc);
		n->name = ident(P, "a name");
		return n;
	}
	diag_error(t.loc, "expected an expression, found %s", tok_str(t));
}

/* one subscript: an index, or a range lo:hi with either end left out */
static Node *subscript(Parser *P)
{
	Tok t = P->tok;
	Node *lo = NULL;
	if (!is(t, ":")) {
		lo = expr(P);
		if (!is(P->tok, ":"))
			return lo;
	}
	Node *r = node(N_RANGE, t.loc);
	next(P);
	r->a = lo;
	if (!is(P->tok, ",") && !is(P->tok, "]"))
		r->b = expr(P);
	return r;
}

static Node *postfix(Parser *P)
{
	Node *n = primary(P);
	int opened = 0;
	for (;; opened++) {
		Tok t = P->tok;
		if (is(t, "(") && n->kind == N_NAME) {
			nest(P, t.loc, "expression");
			next(P);
			Node *c = node(N_CALL, n->loc);
			c->name = n->name;
			Vec(const char *) names = {0};
			if (!is(P->tok, ")")) {
				do {
					const char *an = NULL;
					if (P->tok.kind == T_IDENT && is(P->next, "=")) {
						an = ident(P, "an argument name");
						next(P);
					}
					vec_push(&c->args, expr(P));
					vec_push(&names, an);
				} while (accept(P, ","));
			}
			expect(P, ")", "to close the call");
			c->argname = names.data;
			n = c;
		} else if (is(t, "[")) {
			nest(P, t.loc, "expression");
			next(P);
			Node *x = node(N_INDEX, t.loc);
			x->a = n;
			do
				vec_push(&x->args, subscript(P));
			while (accept(P, ","));
			expect(P, "]", "to close the index");
			if (x->args.len == 1 && x->args.data[0]->kind != N_RANGE) {
				x->b = x->args.data[0];
				x->args.len = 0;
			}
			n = x;
		} else {
			unnest(P, opened);
			return n;
		}
	}
}

static Node *unary(Parser *P)
{
	Tok t = P->tok;
	if (accept(P, "-")) {
		nest(P, t.loc, "expression");
		Node *n = node(N_NEG, t.loc);
		n->a = unary(P);
		unnest(P, 1);
		return n;
	}
	return postfix(P);
}

/* Three levels, loosest first: comparisons, then + -, then * / @. */
static Node *binary(Parser *P, int level)
{
	static const char *ops[3][7] = {{"<", "<=", ">", ">=", "==", "!=", NULL}, {"+", "-", NULL}, {"*", "/", "@", NULL}};
	Node *n = level == 3 ? unary(P) : binary(P, level + 1);
	for (;;) {
		Tok t = P->tok;
		const char *hit = NULL;
		for (int i = 0; level < 3 && ops[level][i]; i++)
			if (t.kind == T_PUNCT && is(t, ops[level][i]))
				hit = ops[level][i];
		if (!hit)
			return n;
		next(P);
		Node *b = node(N_BIN, t.loc);
		b->op = fe_binop(hit);
		b->a = n;
		b->b = binary(P, level + 1);
		n = b;
	}
}

static Node *expr(Parser *P) { return binary(P, 0); }

/* ---- statements and items ---- */

static void block(Parser *P, NodeList *out, Loc open);

/* NAME = expr after `let`, `report` or `update`, located at the name */
static Node *binding(Parser *P, NodeKind k, const char *what)
{
	Node *n = node(k, P->tok.loc);
	n->name = ident(P, what);
	if (k == N_UPDATE && accept(P, "[")) {
		/* update NAME[i] = e: one layer of a buffer */
		n->b = expr(P);
		expect(P, "]", "after the layer index");
	}
	expect(P, "=", "after the name");
	n->a = expr(P);
	return n;
}

static Node *statement(Parser *P)
{
	Tok t = P->tok;
	if (accept(P, "let"))
		return binding(P, N_LET, "a name after 'let'");
	if (accept(P, "report"))
		return binding(P, N_REPORT, "a name after 'report'");
	if (accept(P, "update"))
		return binding(P, N_UPDATE, "a buffer name after 'update'");
	if (accept(P, "return")) {
		Node *n = node(N_RETURN, t.loc);
		n->a = expr(P);
		return n;
	}
	if (accept(P, "for")) {
		Node *n = node(N_FOR, t.loc);
		n->loc = P->tok.loc;
		n->name = ident(P, "a loop variable after 'for'");
		expect(P, "in", "after the loop variable");
		Loc rl = P->tok.loc;
		n->lo = const_expr(P);
		expect(P, "..", "in the loop range");
		n->hi = const_expr(P);
		if (n->lo < 0 || n->lo >= n->hi)
			diag_error(rl, "empty or negative loop range %lld..%lld", (long long)n->lo, (long long)n->hi);
		Tok open = expect(P, "{", "to open the loop body");
		nest(P, open.loc, "block");
		block(P, &n->args, open.loc);
		unnest(P, 1);
		return n;
	}
	if (t.kind == T_IDENT && is(P->next, "=")) {
		Node *n = node(N_ASSIGN, t.loc);
		n->name = ident(P, "a name");
		next(P);
		n->a = expr(P);
		return n;
	}
	if (t.kind == T_IDENT && !is_keyword(t))
		diag_error(P->next.loc, "expected '=' after '%.*s' (a statement is let, assignment, for, report, update or return)", t.len, t.s);
	diag_error(t.loc, "expected a statement (let, assignment, for, report, update or return), found %s", tok_str(t));
}

static void block(Parser *P, NodeList *out, Loc open)
{
	while (!is(P->tok, "}")) {
		if (P->tok.kind == T_EOF)
			diag_error(open, "unterminated block: this '{' has no matching '}'");
		/* a declaration inside a block: most likely a '}' is missing */
		static const char *items[] = {"const", "param", "buffer", "input", "fn", "loss"};
		for (size_t i = 0; i < sizeof items / sizeof *items; i++)
			if (is(P->tok, items[i]))
				diag_error(open, "unterminated block: this '{' has no matching '}' before '%s' at %d:%d",
				           items[i], P->tok.loc.line, P->tok.loc.col);
		vec_push(out, statement(P));
		accept(P, ";");
	}
	next(P);
}

static void dup_check(Parser *P, const char *name, Loc loc)
{
	if (map_get(&P->ast->declared, name) >= 0)
		diag_error(loc, "'%s' is already declared", name);
	map_put(&P->ast->declared, name, 1);
}

/* An initialiser's argument: numbers and integer constants with + - * /
 * and parentheses, in double precision (normal(0.16 / L) scales a deep
 * net's weights with its depth). */
static double real_expr(Parser *P, const char *what);

static double real_atom(Parser *P, const char *what)
{
	Tok t = P->tok;
	if (accept(P, "(")) {
		nest(P, t.loc, "constant expression");
		double v = real_expr(P, what);
		expect(P, ")", "to close the parenthesis");
		unnest(P, 1);
		return v;
	}
	if (accept(P, "-")) {
		nest(P, t.loc, "constant expression");
		double v = -real_atom(P, what);
		unnest(P, 1);
		return v;
	}
	if (t.kind == T_INT || t.kind == T_FLOAT) {
		next(P);
		return t.fval;
	}
	if (t.kind == T_IDENT && !is_keyword(t)) {
		const char *name = ident(P, "a constant");
		Const *c = find_const(P->ast, name);
		if (!c)
			diag_error(t.loc, "'%s' is not a constant declared before this point", name);
		return (double)c->value;
	}
	diag_error(t.loc, "expected a number for %s, found %s", what, tok_str(t));
}

static double real_term(Parser *P, const char *what)
{
	double v = real_atom(P, what);
	for (;;) {
		Tok t = P->tok;
		if (accept(P, "*")) {
			v *= real_atom(P, what);
		} else if (accept(P, "/")) {
			double r = real_atom(P, what);
			if (r == 0)
				diag_error(t.loc, "division by zero in a constant expression");
			v /= r;
		} else {
			return v;
		}
	}
}

static double real_expr(Parser *P, const char *what)
{
	double v = real_term(P, what);
	for (;;) {
		if (accept(P, "+"))
			v += real_term(P, what);
		else if (accept(P, "-"))
			v -= real_term(P, what);
		else
			return v;
	}
}

static double signed_number(Parser *P, const char *what)
{
	Loc l = P->tok.loc;
	double v = real_expr(P, what);
	if (!isfinite(v))
		diag_error(l, "%s is not a finite number (%g)", what, v);
	return v;
}

/* `param` or, with buffer, `buffer`: the same declaration */
static void parse_param(Parser *P, bool buffer)
{
	const char *what = buffer ? "buffer" : "parameter";
	Param q = {0};
	q.loc = P->tok.loc;
	q.buffer = buffer;
	q.name = ident(P, buffer ? "a buffer name" : "a parameter name");
	dup_check(P, q.name, q.loc);
	q.grad = q.opt_m = q.opt_v = q.master = q.gsum = q.slot = q.hgrad = -1;
	expect(P, ":", buffer ? "after the buffer name" : "after the parameter name");
	Loc tl = P->tok.loc;
	q.type = parse_type(P, &q.stacked);
	if (!ir_is_real(q.type.dt))
		diag_error(tl, "%ss must be real (f32, bf16 or f64)", what);
	if (!is(P->tok, "="))
		diag_error(q.loc, "%s '%s' needs an initialiser: = normal(STD), uniform(LO, HI), zeros, ones or load(\"NAME\")", what, q.name);
	next(P);
	Tok t = P->tok;
	if (accept(P, "zeros")) {
		q.init = INIT_ZEROS;
	} else if (accept(P, "ones")) {
		q.init = INIT_ONES;
	} else if (accept(P, "normal")) {
		q.init = INIT_NORMAL;
		expect(P, "(", "after normal");
		Loc l = P->tok.loc;
		q.a = signed_number(P, "the standard deviation");
		if (q.a < 0)
			diag_error(l, "a standard deviation cannot be negative");
		expect(P, ")", "after the standard deviation");
	} else if (accept(P, "uniform")) {
		q.init = INIT_UNIFORM;
		expect(P, "(", "after uniform");
		Loc l = P->tok.loc;
		q.a = signed_number(P, "the lower bound");
		expect(P, ",", "between the bounds");
		q.b = signed_number(P, "the upper bound");
		if (q.b <= q.a)
			diag_error(l, "uniform(%g, %g) is an empty range", q.a, q.b);
		expect(P, ")", "after the bounds");
	} else if (accept(P, "load")) {
		/* its start from the weights file (or --init) under NAME, which --save writes too */
		q.init = INIT_LOAD;
		expect(P, "(", "after load");
		q.saved = string(P, "the tensor's name in the weights file");
		expect(P, ")", "after the name");
	} else {
		diag_error(t.loc, "unknown initialiser %s: expected normal(STD), uniform(LO, HI), zeros, ones or load(\"NAME\")", tok_str(t));
	}
	/* `nodecay` after the initialiser: AdamW leaves it (biases and gains it leaves anyway) */
	Tok nd = P->tok;
	if (accept(P, "nodecay")) {
		if (buffer)
			diag_error(nd.loc, "a buffer is not trained: nodecay does not apply to it");
		q.nodecay = true;
	}
	vec_push(&P->ast->params, q);
}

static void parse_fn(Parser *P)
{
	Fn f = {0};
	f.loc = P->tok.loc;
	f.name = ident(P, "a function name");
	dup_check(P, f.name, f.loc);
	expect(P, "(", "after the function name");
	if (!is(P->tok, ")")) {
		do {
			Loc l = P->tok.loc;
			const char *n = ident(P, "a parameter name");
			for (int i = 0; i < f.pnames.len; i++)
				if (!strcmp(f.pnames.data[i], n))
					diag_error(l, "parameter '%s' appears twice", n);
			expect(P, ":", "after the parameter name");
			Type t = parse_type(P, NULL);
			vec_push(&f.pnames, n);
			vec_push(&f.ptypes, t);
			vec_push(&f.plocs, l);
		} while (accept(P, ","));
	}
	expect(P, ")", "to close the parameter list");
	expect(P, "->", "before the result type");
	f.ret = parse_type(P, NULL);
	Tok open = expect(P, "{", "to open the function body");
	block(P, &f.body, open.loc);
	vec_push(&P->ast->fns, f);
	map_put(&P->ast->fn_index, f.name, P->ast->fns.len - 1);
}

static void parse_items(Parser *P)
{
	while (P->tok.kind != T_EOF) {
		Tok t = P->tok;
		if (accept(P, "const")) {
			do {
				Const c = {0};
				c.loc = P->tok.loc;
				c.name = ident(P, "a constant name");
				dup_check(P, c.name, c.loc);
				expect(P, "=", "after the constant name");
				c.value = const_expr(P);
				for (int i = 0; i < P->ndefs; i++)
					if (!strcmp(P->defs[i].name, c.name)) {
						c.value = P->defs[i].value;
						P->used_def[i] = true;
					}
				check_range(c.loc, c.value);
				vec_push(&P->ast->consts, c);
				map_put(&P->ast->const_index, c.name, P->ast->consts.len - 1);
			} while (accept(P, ","));
		} else if (accept(P, "param")) {
			parse_param(P, false);
		} else if (accept(P, "buffer")) {
			parse_param(P, true);
		} else if (accept(P, "input")) {
			Input in = {0};
			in.loc = P->tok.loc;
			in.name = ident(P, "an input name");
			dup_check(P, in.name, in.loc);
			expect(P, ":", "after the input name");
			int stacked;
			in.type = parse_type(P, &stacked);
			vec_push(&P->ast->inputs, in);
		} else if (accept(P, "fn")) {
			parse_fn(P);
		} else if (accept(P, "weights")) {
			if (P->ast->weights)
				diag_error(t.loc, "a second weights file (a program starts from one)");
			P->ast->weights_loc = P->tok.loc;
			P->ast->weights = string(P, "the weights file");
		} else if (accept(P, "loss")) {
			if (P->ast->has_loss)
				diag_error(t.loc, "a second loss block (a program has exactly one)");
			P->ast->has_loss = true;
			P->ast->loss_loc = t.loc;
			Tok open = expect(P, "{", "to open the loss block");
			block(P, &P->ast->loss, open.loc);
		} else {
			diag_error(t.loc, "expected const, param, buffer, input, fn, weights or loss at the top level, found %s", tok_str(t));
		}
		accept(P, ";");
	}
}

/* The whole file, NUL-terminated, from the arena; at most MAX_SOURCE bytes. */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		fatal("cannot open %s: %s", path, strerror(errno));
	size_t cap = 1 << 16, n = 0, r;
	char *buf = ar_alloc(cap + 1);
	while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n > MAX_SOURCE) {
			fclose(f);
			fatal("%s: the source is larger than %zu MiB, dpc's limit for one program", path, MAX_SOURCE >> 20);
		}
		if (n == cap) {
			buf = ar_realloc(buf, cap + 1, 2 * cap + 1);
			cap *= 2;
		}
	}
	bool bad = ferror(f);
	int e = errno;
	fclose(f);
	if (bad)
		fatal("cannot read %s: %s", path, strerror(e));
	buf[n] = 0;
	*len = n;
	return buf;
}

/* A NUL byte or invalid UTF-8 means this is not a program: say so at the byte. */
static void check_text(const char *file, const char *s, size_t len)
{
	int line = 1, col = 1;
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)s[i];
		int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		bool bad = c == 0 || n == 0 || i + (size_t)n > len;
		for (int k = 1; !bad && k < n; k++)
			bad = ((unsigned char)s[i + k] >> 6) != 2;
		if (bad)
			diag_error((Loc){file, line, col}, "not a text file (byte 0x%02x at offset %zu is not UTF-8 text)", c, i);
		if (c == '\n')
			line++, col = 1;
		else
			col++;
		i += (size_t)n;
	}
}

FeAst *fe_parse(const char *path, const FeDefine *defs, int ndefs)
{
	size_t len;
	char *src = read_file(path, &len);
	return fe_parse_text(path, src, len, defs, ndefs);
}

FeAst *fe_parse_text(const char *path, const char *text, size_t len, const FeDefine *defs, int ndefs)
{
	if (len > MAX_SOURCE)
		fatal("%s: the source is larger than %zu MiB, dpc's limit for one program", path, MAX_SOURCE >> 20);
	char *src = ar_strndup(text, len);
	check_text(path, src, len);
	diag_source(path, src);
	Parser P = {0};
	P.file = path;
	P.src = P.p = src;
	P.line = P.col = 1;
	P.ast = ar_alloc(sizeof *P.ast);
	P.ast->file = path;
	P.defs = defs;
	P.ndefs = ndefs;
	P.used_def = ar_alloc(sizeof(bool) * (size_t)(ndefs + 1));
	P.tok = lex(&P);
	P.next = lex(&P);
	if (P.tok.kind == T_EOF)
		diag_error((Loc){path, 1, 1}, "empty program: expected a loss block");
	parse_items(&P);
	for (int i = 0; i < ndefs; i++)
		if (!P.used_def[i])
			fatal("-D %s: no const named %s in %s", defs[i].name, defs[i].name, path);
	if (!P.ast->has_loss)
		diag_error(here(&P), "no loss block: a program needs `loss { ... return SCALAR }`");
	return P.ast;
}

/* ---- --emit=ast ---- */

static void print_node(FILE *f, Node *n, int depth);

static void print_list(FILE *f, NodeList *l, int depth)
{
	for (int i = 0; i < l->len; i++)
		print_node(f, l->data[i], depth);
}

static void print_expr(FILE *f, Node *n)
{
	switch (n->kind) {
	case N_NUM:
		fprintf(f, "%.17g", n->num);
		return;
	case N_NAME:
		fputs(n->name, f);
		return;
	case N_BIN: {
		/* (+ (+ (+ a b) c) d) */
		NodeList spine = {0};
		Node *bottom = fe_left_spine(n, &spine);
		for (int i = 0; i < spine.len; i++)
			fprintf(f, "(%s ", fe_binop_text(spine.data[i]->op));
		print_expr(f, bottom);
		for (int i = spine.len - 1; i >= 0; i--) {
			fputc(' ', f);
			print_expr(f, spine.data[i]->b);
			fputc(')', f);
		}
		return;
	}
	case N_NEG:
		fputs("(neg ", f);
		print_expr(f, n->a);
		fputc(')', f);
		return;
	case N_INDEX:
		fputs("(index ", f);
		print_expr(f, n->a);
		if (n->b) {
			fputc(' ', f);
			print_expr(f, n->b);
		}
		for (int i = 0; i < n->args.len; i++) {
			fputc(' ', f);
			print_expr(f, n->args.data[i]);
		}
		fputc(')', f);
		return;
	case N_RANGE:
		fputs("(range ", f);
		if (n->a)
			print_expr(f, n->a);
		else
			fputc('_', f);
		fputc(' ', f);
		if (n->b)
			print_expr(f, n->b);
		else
			fputc('_', f);
		fputc(')', f);
		return;
	case N_CALL:
	case N_LIST:
		fprintf(f, "(%s", n->kind == N_CALL ? n->name : "list");
		for (int i = 0; i < n->args.len; i++) {
			fputc(' ', f);
			if (n->kind == N_CALL && n->argname[i])
				fprintf(f, "%s=", n->argname[i]);
			print_expr(f, n->args.data[i]);
		}
		fputc(')', f);
		return;
	default:
		unreachable();
	}
}

static void print_node(FILE *f, Node *n, int depth)
{
	fprintf(f, "%*s", 2 * depth, "");
	switch (n->kind) {
	case N_LET:
	case N_ASSIGN:
	case N_REPORT:
	case N_UPDATE:
		fprintf(f, "(%s %s ", n->kind == N_LET ? "let" : n->kind == N_REPORT ? "report" : n->kind == N_UPDATE ? "update" : "set", n->name);
		if (n->kind == N_UPDATE && n->b) {
			fputs("(layer ", f);
			print_expr(f, n->b);
			fputs(") ", f);
		}
		print_expr(f, n->a);
		fputs(")\n", f);
		return;
	case N_RETURN:
		fputs("(return ", f);
		print_expr(f, n->a);
		fputs(")\n", f);
		return;
	case N_FOR:
		fprintf(f, "(for %s %lld %lld\n", n->name, (long long)n->lo, (long long)n->hi);
		print_list(f, &n->args, depth + 1);
		fprintf(f, "%*s)\n", 2 * depth, "");
		return;
	default:
		print_expr(f, n);
		fputc('\n', f);
	}
}

void fe_print_ast(FILE *f, FeAst *a)
{
	for (int i = 0; i < a->consts.len; i++)
		fprintf(f, "(const %s %lld)\n", a->consts.data[i].name, (long long)a->consts.data[i].value);
	static const char *inits[] = {"zeros", "ones", "normal", "uniform", "load"};
	if (a->weights)
		fprintf(f, "(weights \"%s\")\n", a->weights);
	for (int i = 0; i < a->params.len; i++) {
		Param *q = &a->params.data[i];
		fprintf(f, "(%s %s %s %s", q->buffer ? "buffer" : "param", q->name, ir_decl_type_str(q->type, q->stacked), inits[q->init]);
		if (q->init == INIT_NORMAL)
			fprintf(f, " %g", q->a);
		if (q->init == INIT_UNIFORM)
			fprintf(f, " %g %g", q->a, q->b);
		if (q->init == INIT_LOAD)
			fprintf(f, " \"%s\"", q->saved);
		fputs(q->nodecay ? " nodecay)\n" : ")\n", f);
	}
	for (int i = 0; i < a->inputs.len; i++)
		fprintf(f, "(input %s %s)\n", a->inputs.data[i].name, ir_type_str(a->inputs.data[i].type));
	for (int i = 0; i < a->fns.len; i++) {
		Fn *fn = &a->fns.data[i];
		fprintf(f, "(fn %s (", fn->name);
		for (int k = 0; k < fn->pnames.len; k++)
			fprintf(f, "%s%s %s", k ? " " : "", fn->pnames.data[k], ir_type_str(fn->ptypes.data[k]));
		fprintf(f, ") %s\n", ir_type_str(fn->ret));
		print_list(f, &fn->body, 1);
		fputs(")\n", f);
	}
	fputs("(loss\n", f);
	print_list(f, &a->loss, 1);
	fputs(")\n", f);
}
