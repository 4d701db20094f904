/* A process that loads a library after it started, for the synth
 * package's profiler example: it reads the library's path from stdin,
 * dlopen()s it, says "ok", and spins in its lib_spin for ever. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	char path[4096];
	if (!fgets(path, sizeof path, stdin))
		return 1;
	path[strcspn(path, "\n")] = 0;
	void *lib = dlopen(path, RTLD_NOW);
	uint64_t (*spin)(uint64_t) = lib ? (uint64_t (*)(uint64_t))dlsym(lib, "lib_spin") : NULL;
	if (!spin) {
		printf("error %s\n", dlerror());
		return 1;
	}
	printf("ok\n");
	fflush(stdout);
	for (uint64_t t = 0;;)
		t += spin(20000);
}
