package synth

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/synth-dev/synth/internal/perfhost"
	"github.com/synth-dev/synth/perfdata"
)

// attrName is the event name perf tools show for the dump's attr.
const attrName = "dummy:u"

// WriteOptions configure how perf.data is written: by WritePerfData,
// Profile and Inject. The zero value records os.Args and chooses the
// mode from the output.
type WriteOptions struct {
	// Cmdline is recorded in the CMDLINE feature; nil means os.Args.
	Cmdline []string
	// Mode is file or pipe mode; the zero value chooses from the output
	// as `perf record -o` does: file mode only for a regular file at
	// its start.
	Mode perfdata.Mode
}

// WritePerfData runs one dump of m and writes its records to out as
// perf.data, under m's attrs, with the build IDs of its mappings unless
// m's Options say NoBuildID. out is not closed. When the dump fails part
// way, what was written is still closed off as a valid perf.data file,
// and the error is returned.
func WritePerfData(ctx context.Context, m *Method, out io.Writer, opts WriteOptions) (Stats, error) {
	w, host, err := newPerfWriter(out, m.Attrs(), opts)
	if err != nil {
		return Stats{}, err
	}
	st, err := m.Dump(ctx, w.WriteRecord)
	if err == nil {
		err = w.EndInit()
	}
	return st, finishPerfData(w, host, st.Tables, err)
}

// newPerfWriter starts perf.data on out under attrs, with the host's
// features and opts.Cmdline (os.Args if nil). A pipe's header comes
// first, features and all; a file's is written last, so there the
// host's features are read on a goroutine while the records are
// written (the caches alone take milliseconds of sysfs reads), and come
// through the channel it returns, for finishPerfData.
func newPerfWriter(out io.Writer, attrs []perfdata.EventAttr, opts WriteOptions) (*perfdata.Writer, <-chan []perfdata.Feature, error) {
	cmdline := opts.Cmdline
	if cmdline == nil {
		cmdline = os.Args
	}
	// The clocks are read now, when the records' times begin.
	wo := perfdata.WriterOptions{Attrs: attrs, Mode: opts.Mode, Features: perfhost.WithClock(nil, attrs)}
	var host chan []perfdata.Feature
	if perfdata.WritesFile(out, opts.Mode) {
		host = make(chan []perfdata.Feature, 1)
		go func() { host <- perfhost.Features(cmdline) }()
	} else {
		wo.Features = append(wo.Features, perfhost.Features(cmdline)...)
	}
	w, err := perfdata.NewWriter(out, wo)
	if err != nil {
		return nil, nil, fmt.Errorf("start perf.data: %w", err)
	}
	return w, host, nil
}

// finishPerfData closes off w after the records: the host's features
// that come through host (file mode; nil in pipe mode), then the tables
// t (see perfdata.Writer.WriteTables), then the header or end. After
// err, the error that ended the records, the build IDs are left out, but
// w is closed still, so that what was written stays readable; it
// returns the first error.
func finishPerfData(w *perfdata.Writer, host <-chan []perfdata.Feature, t perfdata.Tables, err error) error {
	if host != nil {
		for _, f := range <-host {
			_ = w.AddFeature(f) // file mode: kept for Close, no error
		}
	}
	if err != nil {
		t.BuildIDs = nil
	}
	if terr := w.WriteTables(t); err == nil {
		err = terr
	}
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("finish perf.data: %w", cerr)
	}
	return err
}
