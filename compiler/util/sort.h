/* DEFINE_SORT: a sort of an array by a key, for the compiler's hot loops
 * (the selection's evaluator, the memory planner's packing). */
#ifndef DPC_SORT_H
#define DPC_SORT_H

#include <stdlib.h>

/* static void name(T *a, int n, int depth): a[] sorted by KEY(element),
 * cmp the same order for qsort; depth 64. Quicksort on a median of three,
 * insertion sort below 24 elements, glibc's qsort past a depth that only an
 * adversary reaches. glibc's qsort (a merge sort through a comparison call)
 * was a fifth of an evaluation on the cell networks. Equal keys end in any
 * order: a caller must not depend on theirs. */
#define DEFINE_SORT(name, T, KEY, cmp)                                              \
	static void name(T *a, int n, int depth)                                    \
	{                                                                           \
		while (n > 24) {                                                    \
			if (depth-- == 0) {                                         \
				qsort(a, (size_t)n, sizeof *a, cmp);                \
				return;                                             \
			}                                                           \
			T x = a[0], y = a[n / 2], z = a[n - 1], t;                  \
			T p = KEY(x) < KEY(y) ? (KEY(y) < KEY(z) ? y : KEY(x) < KEY(z) ? z : x) \
					      : (KEY(x) < KEY(z) ? x : KEY(y) < KEY(z) ? z : y); \
			int i = -1, j = n;                                          \
			for (;;) {                                                  \
				do i++; while (KEY(a[i]) < KEY(p));                 \
				do j--; while (KEY(p) < KEY(a[j]));                 \
				if (i >= j)                                         \
					break;                                      \
				t = a[i], a[i] = a[j], a[j] = t;                    \
			}                                                           \
			if (j >= n - 1) { /* no progress: not with a median */    \
				qsort(a, (size_t)n, sizeof *a, cmp);                \
				return;                                             \
			}                                                           \
			/* [0, j] and [j + 1, n): the smaller by recursion */       \
			if (j + 1 < n - j - 1) {                                    \
				name(a, j + 1, depth);                              \
				a += j + 1, n -= j + 1;                             \
			} else {                                                    \
				name(a + j + 1, n - j - 1, depth);                  \
				n = j + 1;                                          \
			}                                                           \
		}                                                                   \
		for (int i = 1; i < n; i++) {                                       \
			T v = a[i];                                                 \
			int k = i;                                                  \
			for (; k > 0 && KEY(v) < KEY(a[k - 1]); k--)                \
				a[k] = a[k - 1];                                    \
			a[k] = v;                                                   \
		}                                                                   \
	}

#endif
