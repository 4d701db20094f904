// Package perfdata encodes and decodes the perf.data format that the
// perf tools read (tools/perf/Documentation/perf.data-file-format.txt):
// the records of include/uapi/linux/perf_event.h with their
// sample_id_all trailers, perf_event_attr, feature sections, and a Writer
// for file mode and pipe mode. The Reader is strict and bounds every
// size it reads, so it can be pointed at untrusted files.
//
// Files are written in little-endian order, the order of the hosts synth
// runs on; attrs are written with size 128 (PERF_ATTR_SIZE_VER7), the
// largest perf 6.1 accepts.
package perfdata
