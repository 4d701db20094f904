// Package perfdata encodes and decodes the perf.data format that the
// perf tools read (tools/perf/Documentation/perf.data-file-format.txt):
// the records of include/uapi/linux/perf_event.h with their
// sample_id_all trailers (Decode gives each type's struct, samples
// included), perf_event_attr, feature sections, and a Writer for file
// mode and pipe mode. The Reader (a file) and the StreamReader (a pipe,
// as it arrives) are strict and bound every size they read, so they can
// be pointed at untrusted input.
//
// Files are written in little-endian order, the order of the hosts synth
// runs on; attrs are written with size 128 (PERF_ATTR_SIZE_VER7), the
// largest perf 6.1 accepts.
package perfdata
