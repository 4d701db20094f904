// Package buildidcache puts the files a recording names into perf's
// build-ID cache, as perf record does at its end, so that perf report
// still finds a binary by its build ID once the file at its path has
// been rebuilt or removed.
//
// The layout is perf 6.1's (tools/perf/util/build-id.c), as `perf
// record` and `perf buildid-cache -a` leave it:
//
//	DIR/PATH/BUILDID/elf                 a copy of the file at PATH
//	DIR/[kernel.kallsyms]/BUILDID/kallsyms  a copy of /proc/kallsyms
//	DIR/[vdso]/BUILDID/vdso              the vDSO image
//	DIR/.build-id/XX/REST -> ../../PATH/BUILDID
//
// (checked against perf record's cache: the elf and kallsyms mode 0755,
// the vdso 0600, the directories 0755),
// where BUILDID is the build ID in lower-case hex, XX its first two
// digits and REST the others. DIR is perf's buildid.dir: the value of
// [buildid] dir in perf's config (the file $PERF_CONFIG names, else
// /etc/perfconfig then ~/.perfconfig, the later winning), else
// $HOME/.debug. perf 6.1 does not read PERF_BUILDID_DIR: it sets it,
// for the commands it runs, to the directory it chose; so this package
// ignores it too (a cache put there is one perf report never reads).
//
// Which files: Entries reads a perf.data and returns the entries of its
// build-ID table (HEADER_BUILD_ID) that some sample fell into: a user
// sample's pid and ip are resolved against the MMAP and MMAP2 records
// of its process (following FORK and exec), a kernel sample counts for
// [kernel.kallsyms], and [vdso] is taken always (perf record caches it
// from a recording of a program that never calls it). With all, every
// entry of the table, as perf record --buildid-all.
//
// Safety: the file names come from a perf.data, so Cache.Add writes
// only beneath the cache directory (through an os.Root), creates the
// directories one level at a time and refuses a component that is a
// symlink, writes each file to a temporary name and renames it into
// place, bounds its size (MaxSize), and checks the build ID of what it
// read, and of the copy, against the recorded one: a file whose build ID
// differs is skipped, never linked. A file is read through its
// process's view: /proc/PID/root/PATH (a container's path is not the
// host's), else /proc/PID/map_files/START-END of a process that mapped
// it, while it lives (a file deleted or replaced since; its lookup
// waits for the process's mmap lock, so it comes second), else PATH
// itself. An entry already in the
// cache with the right build ID is left alone, as is an existing
// .build-id link.
//
// Unlike perf, the files are always copied (perf hard-links a file when
// it can, and a later in-place rewrite of the file then changes its
// cached copy), no probes (SDT notes) or debug files (perf copies a
// /usr/lib/debug file it finds as BUILDID/debug) are cached, and kernel
// modules are left out. The files and directories are owned by the user
// who runs synth, in the cache of the HOME it runs with: as perf, synth
// run as root under sudo writes root's files into the .debug of
// whichever HOME sudo left it; it changes no ownership.
package buildidcache
