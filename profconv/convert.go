package profconv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// Options configure a Converter.
type Options struct {
	// NoSymbolize leaves every frame an address: no file is opened.
	NoSymbolize bool
	// Kallsyms is the kernel's symbol table, read only when the file was
	// recorded on the running kernel (default /proc/kallsyms).
	Kallsyms string
}

// Stats count what a conversion met, so that nothing it could not
// place goes unsaid.
type Stats struct {
	Records uint64 // records read
	Samples uint64 // samples converted
	// Unmapped are user frames that no mapping of their process held
	// when sampled (a process or mapping the file never reported): a
	// location with an address and no mapping.
	Unmapped uint64
	// BadSamples are samples that did not decode under their event.
	BadSamples uint64
	// Lost is what the file's LOST and LOST_SAMPLES records count.
	Lost uint64
	// Mappings are the mappings of the profile; NoBuildID those of a
	// file with no build ID in the record, the build-ID section or a
	// file at hand that is provably the one mapped; WrongFile those
	// whose file at hand is not the one recorded (another build ID or
	// inode): neither its symbols nor its build ID were taken.
	Mappings, NoBuildID, WrongFile int
	// Symbolized are the mappings whose frames were named from the
	// file's ELF symbols or from kallsyms.
	Symbolized int
}

// event is one event of the file: a pair of sample types.
type event struct {
	name, unit string
	attr       perfdata.Attr
}

// Converter aggregates the samples of a perf.data, or of a Session,
// by stack, process and thread, resolving each frame against the
// mappings its process had when sampled. Its Profile and OTLP methods
// build the two formats from what it holds.
type Converter struct {
	opts   Options
	table  *synth.Table
	events []event
	// sampled are the events that have samples.
	sampled map[int]bool
	byID    map[uint64]int
	// build IDs of HEADER_BUILD_ID, by file name; kernelID the
	// kernel's.
	fileIDs  map[string][]byte
	kernelID []byte
	hostname string
	osrel    string

	maps      []*mapping
	mapIndex  map[mapKey]int
	kernelMap int // index of [kernel.kallsyms] in maps, or -1
	locs      []location
	locIndex  map[location]int
	samples   map[string]*aggSample
	order     []*aggSample // first seen first: a deterministic output
	first     uint64
	last      uint64
	stats     Stats
	keyBuf    []byte
	frames    []int32
	finished  bool
	local     *localFiles
	rounds    rounds // a file's records held for their round
}

// location is an address of a mapping (-1: none).
type location struct {
	mapping int32
	addr    uint64
}

// aggSample is the sum of the samples of one stack, process and thread.
type aggSample struct {
	pid, tid uint32
	comm     string
	locs     []int32 // leaf first
	values   []int64 // per event: count, period
}

// New returns a Converter for samples of events attrs (perf.data's
// attrs, or a Session's Attrs).
func New(attrs []perfdata.EventAttr, opts Options) (*Converter, error) {
	c := &Converter{opts: opts, table: synth.NewTable(), byID: map[uint64]int{}, sampled: map[int]bool{}, fileIDs: map[string][]byte{},
		mapIndex: map[mapKey]int{}, kernelMap: -1, locIndex: map[location]int{}, samples: map[string]*aggSample{}}
	if err := c.setAttrs(attrs); err != nil {
		return nil, err
	}
	return c, nil
}

// ErrDWARF refuses a file recorded with --call-graph dwarf: its user
// stacks need unwinding with the files' DWARF CFI, which the converter
// does not do.
var ErrDWARF = errors.New("samples with user stacks (perf record --call-graph dwarf) are not supported: record with -g (frame pointers)")

// ErrCompressed refuses a file of compressed records (perf record -z).
var ErrCompressed = errors.New("compressed records (perf record -z) are not supported: record without -z")

// ErrNoSamples says that the file holds no sample: a profile of it
// would say nothing ran.
var ErrNoSamples = errors.New("no samples in the input")

func (c *Converter) setAttrs(attrs []perfdata.EventAttr) error {
	for _, a := range attrs {
		if a.Attr.SampleType&perfdata.SampleStackUser != 0 {
			return ErrDWARF
		}
		if c.eventOf(a) >= 0 {
			continue
		}
		i := len(c.events)
		name, unit := eventName(a)
		c.events = append(c.events, event{name: name, unit: unit, attr: a.Attr})
		for _, id := range a.IDs {
			c.byID[id] = i
		}
	}
	return nil
}

// eventOf returns the event that a's ids are already of, or -1: a
// pipe repeats no attr, but a Session's Attrs are given once more per
// file.
func (c *Converter) eventOf(a perfdata.EventAttr) int {
	for _, id := range a.IDs {
		if i, ok := c.byID[id]; ok {
			return i
		}
	}
	return -1
}

// eventName names an event as perf list does, and its period's unit:
// the software clocks count nanoseconds.
func eventName(a perfdata.EventAttr) (name, unit string) {
	if a.Name != "" {
		name = a.Name
	}
	switch {
	case a.Attr.Type == perfdata.TypeSoftware && a.Attr.Config == perfdata.CountSWCPUClock:
		return cmpOr(name, "cpu-clock"), "nanoseconds"
	case a.Attr.Type == perfdata.TypeSoftware && a.Attr.Config == perfdata.CountSWTaskClock:
		return cmpOr(name, "task-clock"), "nanoseconds"
	case a.Attr.Type == perfdata.TypeHardware && a.Attr.Config == perfdata.CountHWCPUCycles:
		return cmpOr(name, "cycles"), "count"
	case a.Attr.Type == perfdata.TypeHardware && a.Attr.Config == perfdata.CountHWInstructions:
		return cmpOr(name, "instructions"), "count"
	}
	return cmpOr(name, fmt.Sprintf("event-%d-%#x", a.Attr.Type, a.Attr.Config)), "count"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Stats returns what the conversion has met so far; the mapping counts
// once Profile or OTLP has run.
func (c *Converter) Stats() Stats { return c.stats }

// Add takes in one record of a Session (synth.Session.Read): samples
// are aggregated, the other records keep the process table current.
func (c *Converter) Add(r *synth.Record) error {
	if r.Kind == synth.KindSample {
		s, ok := r.Sample()
		if !ok {
			c.stats.BadSamples++
			return nil
		}
		c.addSample(&s, c.sampleEvent(r.Raw, &s))
		return nil
	}
	return c.table.Apply(r)
}

// addRecord takes in one record of a perf.data.
func (c *Converter) addRecord(rec perfdata.Record) error {
	c.stats.Records++
	switch rec.Type {
	case perfdata.RecordCompressed:
		return ErrCompressed
	case perfdata.RecordHeaderAttr:
		return nil // taken by setAttrs from the reader
	case perfdata.RecordHeaderBuildID:
		return c.addBuildID(rec.Data)
	case perfdata.RecordLost:
		if l, _, err := perfdata.ParseLost(rec.Data, 0); err == nil {
			c.stats.Lost += l.Lost
		}
		return nil
	case perfdata.RecordLostSamples:
		if l, _, err := perfdata.ParseLostSamples(rec.Data, 0); err == nil {
			c.stats.Lost += l.Lost
		}
		return nil
	case perfdata.RecordMmap:
		c.kernelMmap(rec.Data)
	case perfdata.RecordSample:
		ev, a := c.recordEvent(rec.Data)
		if a == nil {
			c.stats.BadSamples++
			return nil
		}
		s, err := perfdata.ParseSample(rec.Data, a)
		if err != nil {
			c.stats.BadSamples++
			return nil
		}
		c.addSample(&s, ev)
		return nil
	}
	if rec.Type.Private() || rec.Type >= perfdata.RecordHeaderAttr {
		return nil
	}
	r := synth.Record{Kind: synth.KindLive, Raw: rec.Data}
	if err := c.table.Apply(&r); err != nil {
		return fmt.Errorf("%s record at offset %d: %w", rec.Type, rec.Off, err)
	}
	return nil
}

// kernelMmap takes the kernel text's range from perf's MMAP of
// [kernel.kallsyms]_text (or _stext), pid -1.
func (c *Converter) kernelMmap(rec []byte) {
	m, _, err := perfdata.ParseMmap(rec, 0)
	if err != nil || m.Pid != ^uint32(0) || len(m.Filename) < len(kernelDSO) || m.Filename[:len(kernelDSO)] != kernelDSO {
		return
	}
	k := c.kernelMapping()
	if k.start == 0 || m.Addr < k.start {
		k.start = m.Addr
	}
	k.end = max(k.end, m.Addr+m.Len)
}

// addBuildID takes one entry of HEADER_BUILD_ID.
func (c *Converter) addBuildID(rec []byte) error {
	e, err := perfdata.ParseBuildIDEvent(rec)
	if err != nil {
		return fmt.Errorf("build-ID entry: %w", err)
	}
	if len(e.BuildID) == 0 {
		return nil
	}
	if e.Filename == kernelDSO {
		c.kernelID = e.BuildID
		return nil
	}
	c.fileIDs[e.Filename] = e.BuildID
	return nil
}

// recordEvent returns the event of a sample of the file and its attr.
func (c *Converter) recordEvent(rec []byte) (int, *perfdata.Attr) {
	if len(c.events) == 1 {
		return 0, &c.events[0].attr
	}
	if len(c.events) == 0 {
		return -1, nil
	}
	first := &c.events[0].attr
	var id uint64
	if first.SampleType&perfdata.SampleIdentifier != 0 {
		var ok bool
		if id, ok = perfdata.SampleView(rec).Identifier(); !ok {
			return -1, nil
		}
	} else {
		s, err := perfdata.ParseSample(rec, first)
		if err != nil {
			return -1, nil
		}
		id = s.ID
	}
	i, ok := c.byID[id]
	if !ok {
		return -1, nil
	}
	return i, &c.events[i].attr
}

// sampleEvent returns the event of a Session's sample: its sampler is
// the last attr of the session.
func (c *Converter) sampleEvent(raw []byte, s *perfdata.Sample) int {
	if i, ok := c.byID[s.Identifier]; ok {
		return i
	}
	if i, ok := c.byID[s.ID]; ok {
		return i
	}
	return len(c.events) - 1
}

// perfContextMax is PERF_CONTEXT_MAX: call-chain entries at or above
// it are context markers (PERF_CONTEXT_KERNEL, _USER...), not frames.
const perfContextMax = ^uint64(4095)

// addSample aggregates one sample of event ev.
func (c *Converter) addSample(s *perfdata.Sample, ev int) {
	if ev < 0 || ev >= len(c.events) {
		c.stats.BadSamples++
		return
	}
	c.stats.Samples++
	c.sampled[ev] = true
	if c.first == 0 || s.Time < c.first {
		c.first = s.Time
	}
	c.last = max(c.last, s.Time)
	ips := s.Callchain
	if len(ips) == 0 {
		ips = []uint64{s.IP}
	}
	c.frames = c.frames[:0]
	for _, ip := range ips {
		if ip >= perfContextMax {
			continue
		}
		c.frames = append(c.frames, c.locationOf(s.Pid, ip))
	}
	key := binary.LittleEndian.AppendUint32(c.keyBuf[:0], s.Pid)
	key = binary.LittleEndian.AppendUint32(key, s.Tid)
	for _, f := range c.frames {
		key = binary.LittleEndian.AppendUint32(key, uint32(f))
	}
	c.keyBuf = key
	a, ok := c.samples[string(key)]
	if !ok {
		a = &aggSample{pid: s.Pid, tid: s.Tid, locs: append([]int32(nil), c.frames...), values: make([]int64, 2*len(c.events))}
		if p, ok := c.table.Process(s.Pid); ok {
			a.comm = p.Comm
		}
		c.samples[string(key)] = a
		c.order = append(c.order, a)
	}
	a.values[2*ev]++
	a.values[2*ev+1] += int64(c.period(s, ev))
}

// period is the sample's weight: its PERIOD, or the attr's fixed one.
func (c *Converter) period(s *perfdata.Sample, ev int) uint64 {
	a := &c.events[ev].attr
	if a.SampleType&perfdata.SamplePeriod != 0 {
		return s.Period
	}
	if a.Flags&perfdata.AttrFreq == 0 {
		return a.SamplePeriod
	}
	return 1
}

// locationOf interns the location of address ip of process pid, as
// the table resolves it now.
func (c *Converter) locationOf(pid uint32, ip uint64) int32 {
	l := location{mapping: -1, addr: ip}
	if loc, ok := c.table.Resolve(pid, ip); ok {
		if loc.Kind == synth.LocationKernel {
			l.mapping = int32(c.kernelMapIndex())
			k := c.maps[l.mapping]
			if k.start == 0 || ip < k.start {
				k.start = ip
			}
			k.end = max(k.end, ip+1)
		} else {
			l.mapping = int32(c.mappingOf(&loc))
		}
	} else {
		c.stats.Unmapped++
	}
	if i, ok := c.locIndex[l]; ok {
		return int32(i)
	}
	c.locs = append(c.locs, l)
	c.locIndex[l] = len(c.locs) - 1
	return int32(len(c.locs) - 1)
}

// ReadFile converts the perf.data at path, "-" for standard input (a
// pipe-mode stream).
func ReadFile(path string, opts Options) (*Converter, error) {
	if path == "-" {
		return Read(os.Stdin, opts)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, opts)
}

// Read converts a perf.data of file or pipe mode: a regular file is
// read in place, anything else as a stream.
func Read(r io.Reader, opts Options) (*Converter, error) {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return readFile(f, st.Size(), opts)
		}
	}
	sr, err := perfdata.NewStreamReader(r)
	if err != nil {
		return nil, err
	}
	c, err := New(nil, opts)
	if err != nil {
		return nil, err
	}
	return c.readAllOf(sr, 0)
}

func readFile(f io.ReaderAt, size int64, opts Options) (*Converter, error) {
	rd, err := perfdata.NewReader(f, size)
	if err != nil {
		return nil, err
	}
	for _, ft := range rd.Features() {
		if ft.ID == featCompressed {
			return nil, ErrCompressed
		}
	}
	c, err := New(rd.Attrs(), opts)
	if err != nil {
		return nil, err
	}
	c.takeFeatures(rd.Features())
	return c.readAllOf(rd, len(rd.Attrs()))
}

// records is a perf.data reader, of a file or of a pipe.
type records interface {
	Next() (perfdata.Record, error)
	Attrs() []perfdata.EventAttr // those of the header and those read so far
	Features() []perfdata.Feature
}

// readAllOf is readAll, returning c: with ErrNoSamples too, as the
// caller may still want its stats.
func (c *Converter) readAllOf(rd records, nattrs int) (*Converter, error) {
	err := c.readAll(rd, nattrs)
	if err != nil && !errors.Is(err, ErrNoSamples) {
		return nil, err
	}
	return c, err
}

// readAll takes in every record of rd, whose first nattrs attrs c has
// already; attrs that come as records (pipe mode) are added as they
// come.
func (c *Converter) readAll(rd records, nattrs int) error {
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("input cut short or corrupt: %w", err)
		}
		if attrs := rd.Attrs(); len(attrs) != nattrs {
			if err := c.setAttrs(attrs[nattrs:]); err != nil {
				return err
			}
			nattrs = len(attrs)
		}
		if err := c.take(rec); err != nil {
			return err
		}
	}
	if err := c.flushRound(true); err != nil {
		return err
	}
	c.takeFeatures(rd.Features())
	return c.checkSamples()
}

// featCompressed is HEADER_COMPRESSED: the file's records are.
const featCompressed perfdata.FeatureID = 27

func (c *Converter) checkSamples() error {
	if c.stats.Samples == 0 {
		return ErrNoSamples
	}
	return nil
}

// takeFeatures takes the build IDs and the host's name and release
// from the feature sections.
func (c *Converter) takeFeatures(fs []perfdata.Feature) {
	for _, f := range fs {
		switch f.ID {
		case perfdata.FeatBuildID:
			for rec, err := range perfdata.Records(f.Data) {
				if err != nil {
					break
				}
				c.addBuildID(rec)
			}
		case perfdata.FeatHostname:
			c.hostname = perfString(f.Data)
		case perfdata.FeatOSRelease:
			c.osrel = perfString(f.Data)
		}
	}
}

// perfString reads struct perf_header_string: u32 len, then the string
// NUL-padded to len.
func perfString(b []byte) string {
	if len(b) < 4 {
		return ""
	}
	n := min(int(binary.LittleEndian.Uint32(b)), len(b)-4)
	s := b[4 : 4+n]
	for i, ch := range s {
		if ch == 0 {
			return string(s[:i])
		}
	}
	return string(s)
}

// Reset drops the samples taken in so far, and the mappings and
// locations they made, and keeps the process table: an agent that
// exports a profile per interval resets after each.
func (c *Converter) Reset() {
	c.maps, c.locs, c.order = nil, nil, nil
	c.mapIndex, c.locIndex, c.samples = map[mapKey]int{}, map[location]int{}, map[string]*aggSample{}
	c.kernelMap, c.first, c.last, c.finished = -1, 0, 0, false
	c.sampled = map[int]bool{}
	c.stats = Stats{}
}
