/*
 * testutil.h — helpers shared by the Check suites in tests/.
 *
 * The suites find the workload suite (bench/suite.json in the source tree,
 * or $TIR_SUITE_JSON) and the golden files
 * (tests/golden/, or $TIR_GOLDEN_DIR) through these functions, so a test never
 * hard-codes a path.  Golden files are rewritten instead of compared when
 * TIR_UPDATE_GOLDEN=1 is set.
 */
#ifndef TIR_TESTUTIL_H
#define TIR_TESTUTIL_H

#include <stddef.h>
#include <check.h>

/* Path of the shared workload suite. */
const char *tu_suite_path(void);

/* Number of entries of the suite; its name and workload JSON text by index
 * (both malloc'd).  Return NULL / -1 when the suite cannot be read. */
int tu_suite_count(void);
char *tu_suite_name(int i);
char *tu_suite_workload_at(int i);
/* The "workload" object of the entry called name ("GMM-0"), as JSON text,
 * malloc'd; NULL if there is none. */
char *tu_suite_workload(const char *name);

/* Odd shapes of every operator (name, workload JSON), shared by the suites
 * that check every operator beyond the suite's shapes. */
extern const char *const tu_odd[][2];
extern const int tu_nodd;

/* Path of a golden file (malloc'd). */
char *tu_golden_path(const char *name);
/* Compares text with the golden file `name`; returns 1 when equal.  On a
 * difference it prints the first differing line to stderr and returns 0.
 * With TIR_UPDATE_GOLDEN=1 it writes the file and returns 1. */
int tu_golden_check(const char *name, const char *text);

/* Runs one suite with the usual reporting; returns the process exit status
 * (0 when every test passed). */
int tu_run_suite(Suite *s);

/* The share of the pairs of n items that a and b order alike, counting only
 * pairs with all four figures > 0 and a's two different (NaN if none). */
double tu_pairs_alike(int n, const double *a, const double *b);

#endif
