/* A process that loads and unloads shared libraries on command, for the
 * Table's tests: each line of stdin is "open NAME" (dlopen) or "close"
 * (dlclose of the last library opened and not closed yet); it answers
 * "ok" or the error on stdout. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	void *libs[64];
	int n = 0;
	char line[256], name[200];

	setvbuf(stdout, NULL, _IOLBF, 0);
	puts("ready");
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "open %199s", name) == 1 && n < 64) {
			libs[n] = dlopen(name, RTLD_NOW | RTLD_LOCAL);
			if (!libs[n]) {
				printf("%s\n", dlerror());
				continue;
			}
			n++;
		} else if (strncmp(line, "close", 5) == 0 && n > 0) {
			if (dlclose(libs[--n])) {
				printf("%s\n", dlerror());
				continue;
			}
		} else {
			puts("bad command");
			continue;
		}
		puts("ok");
	}
	return 0;
}
