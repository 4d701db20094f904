/* A CPU-bound workload for synth record's tests: it splits its time
 * between a loop in the main binary and one in a shared library. */
#include <stdint.h>

uint64_t lib_spin(uint64_t n);

__attribute__((noinline)) uint64_t main_spin(uint64_t n)
{
	volatile uint64_t x = 0;
	for (uint64_t i = 0; i < n; i++)
		x += i * 3;
	return x;
}

int main(void)
{
	uint64_t t = 0;
	/* Each call takes some 20 us, far less than the 1 ms between two
	 * samples at -F 999: a sample lands in either loop by their share
	 * of the time, not by the phase of a period near the sampling
	 * one, which drifted by 15 points from one recording to the next
	 * with 2000000. */
	for (;;)
		t += main_spin(20000) + lib_spin(20000);
	return (int)t;
}
