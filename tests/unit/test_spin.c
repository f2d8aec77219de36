/* rg_spin (common/src/clock.c): spins end after their length, by the clock
 * until the tick counter's rate is learned and by the counter after; the rate
 * learned matches the counter's; no length overflows into an early end. */
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "rg_clock.h"

/* Spins ns by rg_spin, returns how long it took on the clock. */
static uint64_t spin_for(uint64_t ns)
{
	rg_spin sp;
	uint64_t t0 = rg_clock_ns();
	rg_spin_start(&sp, ns);
	while (rg_spin_on(&sp))
		;
	return rg_clock_ns() - t0;
}

static void test_by_clock(void)
{
	CHECK_EQ(rg_ticks_rate(), 0); /* nothing learned yet */
	uint64_t took = spin_for(2000000);
	CHECK(took >= 2000000);
	CHECK(took < 1000000000ull);
}

static void test_rate_learned(void)
{
	/* Clock checks 50 ms apart: enough to learn the rate where there is a
	 * counter. */
	spin_for(50000000);
	uint32_t q = rg_ticks_rate();
	if (rg_ticks() == 0) {
		CHECK_EQ(q, 0);
		return;
	}
	if (!CHECK(q > 0))
		return;
	/* The counter's rate measured here, against a sleep. */
	struct timespec d = {0, 30000000};
	uint64_t n0 = rg_clock_ns(), t0 = rg_ticks();
	nanosleep(&d, NULL);
	uint64_t n1 = rg_clock_ns(), t1 = rg_ticks();
	double mine = (double)(t1 - t0) / (double)(n1 - n0), learned = q / 65536.0;
	if (!CHECK(learned > mine * 0.9 && learned < mine * 1.1))
		fprintf(stderr, "    learned %.4f ticks/ns, measured %.4f\n", learned, mine);
}

static void test_by_ticks(void)
{
	/* By the counter now (where there is one): still at least its length,
	 * give or take the rate's error. */
	uint64_t took = spin_for(5000000);
	CHECK(took >= 4500000);
	CHECK(took < 1000000000ull);
}

static void test_long_spin_no_overflow(void)
{
	/* Ten seconds (the longest REMOTE_GPU_*_SPIN_US) in ticks: a product
	 * that overflowed would end the spin at once. */
	rg_spin sp;
	rg_spin_start(&sp, 10000000000ull);
	int on = 1;
	for (int i = 0; i < 200 * RG_SPIN_STRIDE && on; i++)
		on = rg_spin_on(&sp);
	CHECK(on);
}

int main(void)
{
	test_by_clock();
	test_rate_learned();
	test_by_ticks();
	test_long_spin_no_overflow();
	return check_summary("test_spin");
}
