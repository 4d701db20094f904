package floor

//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -cflags "-O2 -g -Wall -Werror" floor floor.bpf.c
