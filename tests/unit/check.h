/*
 * Minimal checks for the unit tests: each failed check prints file:line and the
 * expression, and the test goes on (so one run shows every failure);
 * check_summary() prints "N passed, M failed" and gives main its exit status.
 * Counters are atomic: checks run on several threads in the transport tests.
 */
#ifndef RG_CHECK_H
#define RG_CHECK_H

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* Weak, not static: every file of a test program that includes this shares
 * one pair (the linker keeps one of the weak definitions), so a failure in
 * one file counts in the summary another file's main prints. */
__attribute__((weak)) atomic_int check_passed_, check_failed_;

static inline int check_report_(int ok, const char *file, int line, const char *expr)
{
	if (ok) {
		atomic_fetch_add(&check_passed_, 1);
	} else {
		atomic_fetch_add(&check_failed_, 1);
		fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
	}
	return ok;
}

/* Each evaluates to whether the check passed, so a test can bail out of a
 * block that depends on it: if (!CHECK(p)) return; */
#define CHECK(cond) check_report_(!!(cond), __FILE__, __LINE__, #cond)

#define CHECK_EQ(a, b)                                                                              \
	({                                                                                          \
		long long a_ = (long long)(a), b_ = (long long)(b);                                 \
		int ok_ = check_report_(a_ == b_, __FILE__, __LINE__, #a " == " #b);                 \
		if (!ok_)                                                                           \
			fprintf(stderr, "    %lld != %lld\n", a_, b_);                                  \
		ok_;                                                                                \
	})

#define CHECK_MEM(a, b, n) check_report_(memcmp((a), (b), (n)) == 0, __FILE__, __LINE__, "memcmp(" #a ", " #b ", " #n ")")

static inline int check_summary(const char *name)
{
	int f = atomic_load(&check_failed_);
	printf("%s: %d passed, %d failed\n", name, atomic_load(&check_passed_), f);
	return f ? 1 : 0;
}

#endif
