// Package mapread reads the build ID of a file that a process maps,
// through its /proc/PID/map_files entry (which reaches files in other
// mount namespaces and deleted files), either in this process or in a
// helper process that the caller can abandon.
//
// The helper exists for filesystems whose reads may never end: once a
// FUSE server has taken a read request, the reading thread waits for
// the answer uninterruptibly (fs/fuse/dev.c request_wait_answer), and a
// process with such a thread cannot exit. A read in a helper process
// costs only the helper: the caller stops waiting, and exits when it
// wants to.
//
// A program that uses the helper must let this package's init run
// first in the re-executed binary, which it does whenever the package
// is linked: the helper is /proc/self/exe started with the environment
// variable SYNTH_MAPREAD_HELPER=1.
package mapread
