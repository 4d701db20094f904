// Package perfhost describes the host in the feature sections perf
// record writes into a perf.data header (hostname, CPUs and their
// topology, caches, memory, PMUs, the clock), read from /proc and /sys
// as tools/perf/util/header.c reads them and encoded by package
// perfdata, which itself reads nothing of the host.
package perfhost
