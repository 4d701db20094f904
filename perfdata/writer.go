package perfdata

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// perf.data file header layout (struct perf_file_header,
// tools/perf/util/header.h).
const (
	magic          = "PERFILE2"
	fileHeaderSize = 104
	pipeHeaderSize = 16
	sectionSize    = 16 // struct perf_file_section: u64 offset, size
	fileAttrSize   = AttrSize + sectionSize
	featBits       = 256 // HEADER_FEAT_BITS
)

// EventAttr is one event of a perf.data file: its attr, the name perf
// shows (HEADER_EVENT_DESC) and the sample ids that select it. The
// Writer takes them, the Reader gives them back (with no Name: see
// Reader.Features for HEADER_EVENT_DESC).
type EventAttr struct {
	Attr Attr
	Name string
	IDs  []uint64
}

// WriterOptions configure NewWriter.
type WriterOptions struct {
	Attrs []EventAttr // at least one
	// Features are the header's feature sections. The Writer adds
	// EVENT_DESC unless given, and SAMPLE_TIME in file mode; an attr
	// with use_clockid wants ClockFeatures here.
	Features []Feature
	// Mode is file or pipe mode; the zero value chooses as perf record
	// does.
	Mode Mode
}

// Mode is the layout of a perf.data: file mode (a header that indexes
// the attrs, the data and the feature sections, written last) or pipe
// mode (everything a record, in order, for a stream).
type Mode uint8

const (
	// ModeAuto chooses as perf record does: file mode for a regular file
	// positioned at its start, pipe mode for anything else.
	ModeAuto Mode = iota
	// ModeFile writes file mode, which needs an io.WriteSeeker.
	ModeFile
	// ModePipe writes pipe mode, as perf record -o - does.
	ModePipe
)

// Writer writes perf.data. In file mode (an io.WriteSeeker) the header
// is written first with an empty data section and patched by Close,
// followed by the feature sections; in pipe mode every attr and feature
// becomes a record ahead of the data. Write errors are sticky; in file
// mode Close then makes the file hold the whole records that reached it
// (see salvage).
type Writer struct {
	out      io.Writer
	buf      []byte // bytes not yet written out; whole records in the data section
	landed   int64  // bytes out took
	whole    int64  // file mode: bytes of the data section's whole records that out took
	dataDone bool   // file mode: the data is written; what follows is not records
	pipe     bool
	attrs    []EventAttr
	features []Feature
	dataOff  int64
	dataSize int64
	buildIDs []byte // file mode: the HEADER_BUILD_ID section
	// firstSample and lastSample are the least and greatest sample
	// times written, for HEADER_SAMPLE_TIME (file mode).
	firstSample, lastSample uint64
	oneSampleType           bool // every attr has the first one's sample_type
	err                     error
	closed                  bool
}

// NewWriter starts a perf.data on out. out is not closed by the Writer.
func NewWriter(out io.Writer, opts WriterOptions) (*Writer, error) {
	if len(opts.Attrs) == 0 {
		return nil, errors.New("perf.data needs at least one attr")
	}
	w := &Writer{out: out, buf: make([]byte, 0, bufSize+64<<10)}
	w.attrs = slices.Clone(opts.Attrs)
	for i := range w.attrs {
		if len(w.attrs[i].IDs) == 0 {
			w.attrs[i].IDs = []uint64{uint64(i + 1)}
		}
	}
	w.oneSampleType = !slices.ContainsFunc(w.attrs, func(a EventAttr) bool {
		return a.Attr.SampleType != w.attrs[0].Attr.SampleType
	})
	w.features = slices.Clone(opts.Features)
	if !hasFeature(w.features, FeatEventDesc) {
		w.features = append(w.features, w.eventDesc())
	}
	w.pipe = !WritesFile(out, opts.Mode)
	if !w.pipe {
		if _, ok := out.(io.WriteSeeker); !ok {
			return nil, errors.New("file mode needs an io.WriteSeeker")
		}
		return w, w.startFile()
	}
	return w, w.startPipe()
}

// WritesFile reports whether NewWriter writes out in file mode, given
// WriterOptions.Mode.
func WritesFile(out io.Writer, mode Mode) bool {
	switch mode {
	case ModeFile:
		return true
	case ModePipe:
		return false
	}
	return seekableFile(out)
}

// seekableFile reports whether out is a regular file at offset 0.
func seekableFile(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	off, err := f.Seek(0, io.SeekCurrent)
	return err == nil && off == 0
}

func hasFeature(fs []Feature, id FeatureID) bool {
	return slices.ContainsFunc(fs, func(f Feature) bool { return f.ID == id })
}

func (w *Writer) eventDesc() Feature { return EventDescFeature(w.attrs) }

// Pipe reports whether the writer is in pipe mode.
func (w *Writer) Pipe() bool { return w.pipe }

// Size returns how many bytes the file has so far, buffered ones
// included: what it would take once closed, less the build IDs and
// features Close adds.
func (w *Writer) Size() int64 { return w.landed + int64(len(w.buf)) }

// bufSize is how much the writer gathers before it writes.
const bufSize = 256 << 10

func (w *Writer) write(b []byte) error {
	if w.err != nil {
		return w.err
	}
	w.buf = append(w.buf, b...)
	if len(w.buf) >= bufSize {
		return w.flush()
	}
	return w.err
}

// flush writes the buffer out, and in file mode counts the data
// section's records that out took whole (see salvage).
func (w *Writer) flush() error {
	if w.err != nil || len(w.buf) == 0 {
		return w.err
	}
	n, err := w.out.Write(w.buf)
	if !w.pipe && !w.dataDone {
		w.whole = w.wholeAfter(n, err)
	}
	w.landed += int64(n)
	w.buf = w.buf[:0]
	if err != nil {
		w.err = fmt.Errorf("write perf.data: %w", err)
	}
	return w.err
}

// wholeAfter is the data section's bytes of whole records once out has
// taken n bytes of the buffer. The buffer holds whole records (after the
// header, the attrs and the ids of the first write), so only a short
// write ends inside one, and only then are its records walked.
func (w *Writer) wholeAfter(n int, err error) int64 {
	end := w.landed + int64(n)
	if end <= w.dataOff {
		return 0
	}
	if err == nil {
		return end - w.dataOff
	}
	off := max(w.dataOff-w.landed, 0) // the buffer's first data byte
	for off+8 <= int64(n) {
		size := int64(le.Uint16(w.buf[off+6:]))
		if size < 8 || off+size > int64(n) {
			break
		}
		off += size
	}
	return w.landed + off - w.dataOff
}

// WriteRecord appends a complete record (header.size == len(rec)). Any
// type passes but synth's private ones (RecordType.Private), which it
// refuses with an error wrapping ErrPrivateRecord: perf's records, and
// those of a newer perf, are written as they are. It also refuses an
// MMAP2 whose build ID perf cannot read (ErrBuildIDSize).
func (w *Writer) WriteRecord(rec []byte) error {
	if w.closed {
		return errors.New("write perf.data: writer closed")
	}
	h, err := ParseHeader(rec)
	if err != nil || int(h.Size) != len(rec) {
		return fmt.Errorf("write perf.data: malformed record of %d bytes", len(rec))
	}
	if h.Type.Private() {
		return fmt.Errorf("write perf.data: %w %#x", ErrPrivateRecord, uint32(h.Type))
	}
	if h.Type == RecordMmap2 && h.Misc&MiscMmapBuildID != 0 {
		if m := Mmap2View(rec); !m.Fits() {
			return fmt.Errorf("write perf.data: %w: record of %d bytes", ErrBuildIDSize, len(rec))
		} else if n := m.BuildIDSize(); n > BuildIDMax {
			return fmt.Errorf("write perf.data: %w: %d", ErrBuildIDSize, n)
		}
	}
	w.dataSize += int64(len(rec))
	if h.Type == RecordSample {
		w.noteSample(rec)
	}
	return w.write(rec)
}

// WriteRecordPayload appends a record and the payload that a pipe
// carries after it outside its size (see Record.Payload). In file mode
// the tracing data of a HEADER_TRACING_DATA record becomes the
// HEADER_TRACING_DATA section, where perf keeps it in a file; an
// AUXTRACE trace follows its record in both modes.
func (w *Writer) WriteRecordPayload(rec, payload []byte) error {
	if len(payload) == 0 {
		return w.WriteRecord(rec)
	}
	h, err := ParseHeader(rec)
	if err != nil || int(h.Size) != len(rec) {
		return fmt.Errorf("write perf.data: malformed record of %d bytes", len(rec))
	}
	if !w.pipe && h.Type == RecordHeaderTracingData {
		return w.AddFeature(Feature{ID: FeatTracingData, Data: bytes.Clone(payload)})
	}
	if err := w.WriteRecord(rec); err != nil {
		return err
	}
	w.dataSize += int64(len(payload))
	return w.write(payload)
}

// noteSample notes the time of a sample for HEADER_SAMPLE_TIME. Its
// layout is the first attr's sample_type, or, when the attrs differ,
// that of the attr its leading identifier names.
func (w *Writer) noteSample(rec []byte) {
	st := w.attrs[0].Attr.SampleType
	if !w.oneSampleType && st&SampleIdentifier != 0 && len(rec) >= 16 {
		id := le.Uint64(rec[8:])
		for _, a := range w.attrs {
			if slices.Contains(a.IDs, id) {
				st = a.Attr.SampleType
			}
		}
	}
	t, ok := SampleView(rec).Time(st)
	if !ok {
		return
	}
	if w.firstSample == 0 || t < w.firstSample {
		w.firstSample = t
	}
	w.lastSample = max(w.lastSample, t)
}

// EndInit writes PERF_RECORD_FINISHED_INIT: the state synthesized at
// the start is complete, what follows happened after it (perf record
// writes it after its synthesis).
func (w *Writer) EndInit() error { return w.WriteRecord(headerOnly(RecordFinishedInit)) }

// EndRound writes PERF_RECORD_FINISHED_ROUND after a pass that read
// every ring, as perf record does: a reader may then sort and hand on
// the records of the rounds before.
func (w *Writer) EndRound() error { return w.WriteRecord(headerOnly(RecordFinishedRound)) }

// headerOnly is a record that is only its header.
func headerOnly(typ RecordType) []byte {
	var b [8]byte
	le.PutUint32(b[0:], uint32(typ))
	le.PutUint16(b[6:], 8)
	return b[:]
}

// AddFeature adds a feature: in file mode it is written by Close, in
// pipe mode at once, as a HEADER_FEATURE record.
func (w *Writer) AddFeature(f Feature) error {
	if w.pipe {
		return w.write(featureRecord(nil, f))
	}
	w.features = append(w.features, f)
	return nil
}

// WriteBuildIDs records build IDs so that perf buildid-list finds them:
// in file mode in the HEADER_BUILD_ID section, in pipe mode as
// PERF_RECORD_HEADER_BUILD_ID records, written at once.
func (w *Writer) WriteBuildIDs(evs []BuildIDEvent) error {
	for i := range evs {
		if w.pipe {
			if err := w.write(evs[i].Append(nil)); err != nil {
				return err
			}
			continue
		}
		w.buildIDs = evs[i].Append(w.buildIDs)
	}
	return nil
}

// Close flushes the records and, in file mode, writes the feature
// sections and patches the header. It does not close the output.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.pipe {
		w.flush()
		return w.err
	}
	if w.flush() == nil {
		w.finishFile()
	}
	if w.err != nil {
		w.salvage()
	}
	return w.err
}
