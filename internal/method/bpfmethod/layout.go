package bpfmethod

import "encoding/binary"

// hostOrder reads synth's own structs (bpf/synth.h: synth_hdr,
// synth_mmap2_next, the walk's status, the pending build-ID reads) as
// the programs write them into the rings: in the kernel's byte order,
// the host's. The perf records they carry are read with perfdata's
// views, never with it.
var hostOrder = binary.NativeEndian
