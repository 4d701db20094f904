/* spin.c's loops in a process that comes and goes early in a recording,
 * for synth inject's test: it spins in main_spin until a byte arrives on
 * stdin (the recording has begun), dlopen()s argv[1] (a libspin.so) 100 ms
 * later and spins in its lib_spin too, and exits 200 ms after the byte. */
#include <dlfcn.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

__attribute__((noinline)) uint64_t main_spin(uint64_t n)
{
	volatile uint64_t x = 0;
	for (uint64_t i = 0; i < n; i++)
		x += i * 3;
	return x;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct pollfd p = {.fd = 0, .events = POLLIN};
	uint64_t t = 0, (*lib_spin)(uint64_t) = NULL;

	if (argc != 2)
		return 2;
	/* A poll every 100 calls: some 2 ms. */
	for (int i = 0;; i++) {
		if (i % 100 == 0 && poll(&p, 1, 0) != 0)
			break;
		t += main_spin(20000);
	}
	double start = now();
	while (now() - start < 0.2) {
		if (!lib_spin && now() - start >= 0.1) {
			void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
			if (!h) {
				fprintf(stderr, "%s\n", dlerror());
				return 1;
			}
			lib_spin = (uint64_t (*)(uint64_t))dlsym(h, "lib_spin");
			if (!lib_spin)
				return 1;
		}
		t += main_spin(20000);
		if (lib_spin)
			t += lib_spin(20000);
	}
	return (int)(t & 0);
}
