// Package kcache keeps on disk synth's BPF programs as linked against
// the running kernel, so that the next synth on the same kernel loads
// them without reading the kernel's BTF.
//
// Linking a program against a kernel (CO-RE relocation of its field
// offsets and type IDs, the kernel's BTF IDs of the kfuncs it calls and
// of the iterator it attaches to) needs the kernel's types, and
// cilium/ebpf reads them by parsing /sys/kernel/btf/vmlinux whole: the
// longest step of a one-shot synth dump. What linking yields depends on
// two things only, the BPF object and the kernel's build, so it is kept
// keyed on both: a SHA-256 of the object (the caller's; synth's covers
// the version of cilium/ebpf that links it too), the kernel's GNU build
// ID (the NT_GNU_BUILD_ID note of /sys/kernel/notes), and the size of
// /sys/kernel/btf/vmlinux. Nothing that depends on the boot is kept:
// the kernel text's bounds, which KASLR moves, are found by the probe
// program at every run, loaded from here like the others.
//
// A Program is the instruction stream as the kernel is given it, with
// the map file descriptors of its map loads zeroed (the loader writes
// this run's), the BTF ID of its attach target, and its own BTF with
// the func and line info that point into it.
//
// Each program is a file of its own, DIR/programs-HASH-NAME (DIR is
// the directory Options.KernelCache names, DefaultDir for the synth
// command run as root, HASH the first 16 hex digits of Key.Object: two synth
// builds with different objects keep apart files; NAME the program's):
// magic, version, the key, the program, and the SHA-256 of all that. A
// run reads the files of the programs it loads, no other. Load checks
// each before it returns anything: a file that is missing, short, long,
// of another version, kernel, object or program, whose checksum fails,
// or past MaxSize is a miss (an error wrapping ErrMiss), and the caller
// links the program as if there were no cache. Store writes a temporary
// file in DIR and renames it into place, so a reader sees the old file
// or the new one, never half of one; a store that fails (a read-only or
// full disk) costs the caller nothing but the store. Prune bounds the
// directory: the files of other objects (other synth builds) go MaxAge
// after they were stored, never those of the caller's object.
//
// Trust: the directory is root's. Open creates it with mode 0700 and
// refuses one that is not a directory owned by the effective user with
// no group or other access; Load opens an entry without following a
// symbolic link or waiting on a FIFO (O_NOFOLLOW|O_NONBLOCK) and
// refuses a file that is not a regular file owned by that user that
// others can write. A program that another
// user could change would run in the kernel. The kernel's verifier
// checks whatever is loaded, so a damaged entry can fail a load (the
// caller then links afresh) but not harm the kernel; what it cannot
// check is that the program is the one synth built, which is what the
// ownership, the key and the checksum are for. The synth command keeps
// a cache by default only when it runs as root (euid 0); the library
// only in a directory its caller names.
package kcache
