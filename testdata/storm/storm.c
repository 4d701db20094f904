/*
 * storm: load that makes the kernel report many live records while a
 * dump runs, for synth's losslessness tests.
 *
 *   storm fork    fork children that exit at once, as fast as it can
 *   storm map N   N threads that map, mprotect and unmap executable
 *                 memory in a loop
 *
 * It runs until killed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void *mapper(void *arg)
{
	long page = sysconf(_SC_PAGESIZE);

	(void)arg;
	for (;;) {
		char *p = mmap(NULL, 4 * page, PROT_READ | PROT_EXEC,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		/* Split it: the kernel reports each change. */
		mprotect(p + page, page, PROT_READ);
		mprotect(p + page, page, PROT_READ | PROT_EXEC);
		munmap(p, 4 * page);
	}
	return NULL;
}

static void forker(void)
{
	for (;;) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(0);
		if (pid < 0) {
			perror("fork");
			exit(1);
		}
		waitpid(pid, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "fork") == 0) {
		forker();
	} else if (argc >= 3 && strcmp(argv[1], "map") == 0) {
		int n = atoi(argv[2]);
		pthread_t t;

		for (int i = 0; i < n; i++) {
			if (pthread_create(&t, NULL, mapper, NULL)) {
				fprintf(stderr, "pthread_create failed\n");
				return 1;
			}
		}
		pause();
	}
	fprintf(stderr, "usage: storm fork | storm map N\n");
	return 2;
}
