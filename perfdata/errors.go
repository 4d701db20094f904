package perfdata

import (
	"errors"
	"fmt"
)

// ErrPrivateRecord is returned, wrapped, by Writer.WriteRecord for a
// record of synth's private range (RecordType.Private): such a record is
// for synth's readers, and never belongs in perf.data.
var ErrPrivateRecord = errors.New("synth-private record type")

// FormatError reports malformed perf.data input at a byte offset.
type FormatError struct {
	Off int64
	Msg string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("perfdata: %s at offset %d", e.Msg, e.Off)
}

func errorf(off int64, format string, args ...any) error {
	return &FormatError{Off: off, Msg: fmt.Sprintf(format, args...)}
}

// ErrBuildIDSize is returned, wrapped, by Writer.WriteRecord for an
// MMAP2 record of the build-ID form whose build_id_size is over
// BuildIDMax, or that is too short to hold one: perf 6.1 aborts on it
// ("assertion failed at util/build-id.c:1010", then "stack smashing
// detected"). Mmap2View.ClearBuildID makes such a record one perf reads.
var ErrBuildIDSize = errors.New("mmap2 build id size over 20")
