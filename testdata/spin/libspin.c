/* The shared-library half of spin.c. */
#include <stdint.h>

__attribute__((noinline)) uint64_t lib_spin(uint64_t n)
{
	volatile uint64_t x = 0;
	for (uint64_t i = 0; i < n; i++)
		x += i * 5;
	return x;
}
