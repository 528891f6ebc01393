/* The unit tests' report: a "not ok - GROUP/what" line per failed check,
 * and the counts, which each test's main prints. */
#include <stdbool.h>
#include <stdio.h>

static int pass, fail;
static const char *group;

static void check(bool cond, const char *what)
{
	if (cond) {
		pass++;
	} else {
		fail++;
		printf("not ok - %s/%s\n", group, what);
	}
}
