/*
 * fuzz.h — what the libFuzzer targets of tests/fuzz/ share: a failed
 * invariant aborts with its place and words (libFuzzer keeps the input as
 * crash-*), and the input as a NUL-terminated copy.
 *
 * Each target is one LLVMFuzzerTestOneInput that drives a real entry point
 * of tird with the raw input and checks what the entry point promises
 * (a refusal names its fault; what is accepted is canonical, reparses to
 * itself, is valid JSON...), built with clang -fsanitize=fuzzer,address,
 * undefined (configure CC=clang --enable-fuzz) against the same libraries
 * as tird.  tests/fuzz.sh runs each for a bounded time from its seed corpus
 * (tests/fuzz/corpus/NAME/); bench/fuzz_long.sh for minutes.
 */
#ifndef TIR_FUZZ_H
#define TIR_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_ASSERT(cond, ...)                                                         \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "fuzz: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
			abort();                                                       \
		}                                                                      \
	} while (0)

/* Says why an input was refused, with FUZZ_VERBOSE set (to see which
 * seeds get past the parsers: tests/fuzz/fuzz_NAME corpus/NAME/FILE). */
#define FUZZ_NOTE(...)                                                                 \
	do {                                                                           \
		if (getenv("FUZZ_VERBOSE")) {                                          \
			fprintf(stderr, "fuzz: ");                                     \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
		}                                                                      \
	} while (0)

/* data as a malloc'd string (a NUL added after its size bytes). */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

#endif
