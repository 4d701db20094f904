// Package procmethod holds the methods that read /proc, for hosts where
// BPF is not allowed: procmaps parses /proc/PID/maps, procquery asks the
// kernel with the PROCMAP_QUERY ioctl (Linux 6.11). A pool of workers
// reads the processes; the records come out in the same order, and the
// same, as the BPF method's.
package procmethod
