// Package buildid reads the build IDs of mapped files in userspace, from
// the files themselves (never from a process's memory, which it could
// forge), through /proc/PID/map_files. Each read checks, before and
// after, that the file is the one the dump names; a file on a filesystem
// whose reads may never end (FUSE, network filesystems) is read in a
// helper process, and a dump waits for its reads only until a deadline.
// The BPF and procquery methods share it.
package buildid
