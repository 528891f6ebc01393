/* fe: the frontend. Lexes and parses a .dp file, resolves names, inlines
 * functions, checks shapes and lowers to the forward IR program. Every user
 * error goes through diag_error with the location of the offending token. */
#ifndef DPC_FE_H
#define DPC_FE_H

#include "../ir/ir.h"

typedef struct {
	const char *name;
	int64_t value;
} FeDefine;

typedef struct FeAst FeAst;

/* Reads and parses path. defs override same-named `const` declarations
 * (an unknown name is an error). */
FeAst *fe_parse(const char *path, const FeDefine *defs, int ndefs);
/* The same for a program in memory (len bytes, NULs refused); path names it in errors. */
FeAst *fe_parse_text(const char *path, const char *text, size_t len, const FeDefine *defs, int ndefs);
void fe_print_ast(FILE *f, FeAst *ast); /* --emit=ast */
/* Lowers the loss block (functions inlined) to IR. real_bytes: 2, 4 or 8 (--precision).
 * More than fe_max_ops operations (default 2^20) is an error. */
extern int fe_max_ops;
Program *fe_lower(FeAst *ast, int real_bytes);

#endif
