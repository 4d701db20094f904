package synth

import (
	"context"
	"errors"
	"fmt"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/perfdata"
)

// profFile is an output file of a profile being written.
type profFile struct {
	w *perfdata.Writer
	// The header's tables: the dump's, and those of the live records
	// written; host brings the host's features (see newPerfWriter).
	dump     perfdata.Tables
	live     assemble.Tables
	host     <-chan []perfdata.Feature
	close    func() error
	inRound  bool  // it has records since its last FINISHED_ROUND
	dumpSize int64 // its size once its dump was written; -1 before
}

func (f *profFile) write(rec *Record) error {
	f.inRound = f.inRound || rec.Kind != KindSynthesized
	if rec.Kind != KindSynthesized {
		f.live.AddLive(rec.Raw) // the dump's come with its stats
	}
	return f.w.WriteRecord(rec.Raw) // says "write perf.data: ..."
}

// endRound ends a pass over the rings with FINISHED_ROUND, as perf
// record ends each of its passes.
func (f *profFile) endRound() error {
	if !f.inRound {
		return nil
	}
	f.inRound = false
	return f.w.EndRound()
}

// profRun copies a profile's session into its files: cur, and during a
// switch old, the file that takes the samples until the new file's
// dump has ended (at dumpEnd).
type profRun struct {
	p       *Profiler
	ctx     context.Context
	next    Output
	wopts   WriteOptions
	end     *sampleSwitch
	sw      *switcher
	cur     *profFile
	old     *profFile
	dumpAt  uint64 // the new file's dump was asked for at this time
	dumpEnd uint64 // and ended at this one; 0: not yet
	files   int
	// sampling: ProfileOptions.Sampling has been called
	sampling bool
}

// run writes the files until the profile ends. Each file is closed off,
// even after an error, so that what was written stays readable.
func (r *profRun) run() error {
	if err := r.open(true); err != nil {
		return r.finish(err)
	}
	var recs [readBatch]Record
	for {
		n, err := r.p.s.ReadBatch(recs[:])
		if errors.Is(err, ErrFlushed) {
			done, err := r.flushed()
			if done || err != nil {
				return r.finish(err)
			}
			continue
		}
		if err != nil {
			return r.finish(err)
		}
		for i := range recs[:n] {
			if err := r.put(&recs[i]); err != nil {
				return r.finish(err)
			}
		}
		if r.cur.dumpSize >= 0 {
			r.sw.wrote(r.cur.w.Size() - r.cur.dumpSize)
		}
		if n < len(recs) { // all the session had read: a round ends
			if err := r.endRounds(); err != nil {
				return r.finish(err)
			}
		}
	}
}

// open opens the next file and asks for its dump.
func (r *profRun) open(first bool) error {
	out, closeOut, err := r.next()
	if err != nil {
		return err
	}
	r.files++
	w, host, err := newPerfWriter(out, r.p.s.Attrs(), r.wopts)
	if err != nil {
		closeOut()
		return err
	}
	r.cur = &profFile{w: w, close: closeOut, host: host, dumpSize: -1}
	r.dumpAt, r.dumpEnd = bpfmethod.MonotonicNow(), 0
	// The dump runs to its end even when the profile is stopped early:
	// it takes a fraction of a second and the samples need it.
	if err := r.p.s.Dump(context.WithoutCancel(r.ctx)); err != nil {
		return err
	}
	if first && r.p.opts.Started != nil {
		r.p.opts.Started()
	}
	return nil
}

// put writes a record where it belongs. During a switch, the old file
// takes the records up to the new dump's end, and the new file the
// side-band records from the dump's start on as well: a task the dump
// read before it mapped something has the mapping in both files.
func (r *profRun) put(rec *Record) error {
	switch {
	case rec.Kind == KindDumpEnd:
		return r.dumped()
	case rec.Kind == KindUnmap:
		return nil // synth's own: no perf.data reader knows it
	case rec.Kind == KindSynthesized || r.old == nil || rec.Time >= r.dumpEnd:
		return r.cur.write(rec)
	}
	if rec.Kind == KindLive && rec.Time >= r.dumpAt {
		if err := r.cur.write(rec); err != nil {
			return err
		}
	}
	return r.old.write(rec)
}

// dumped ends the current file's dump. In a switch, the session is
// then flushed: what it returns up to the flush completes the old file.
func (r *profRun) dumped() error {
	if err := r.cur.w.EndInit(); err != nil {
		return err
	}
	r.cur.dumpSize = r.cur.w.Size()
	r.cur.dump = r.p.s.LastDump().Tables
	r.sw.dumped()
	if r.old != nil {
		r.dumpEnd = bpfmethod.MonotonicNow()
		r.p.s.Flush()
	}
	if err := r.end.start(); err != nil {
		return fmt.Errorf("start sampling: %w", err)
	}
	if !r.sampling && r.p.opts.Sampling != nil {
		r.sampling = true
		r.p.opts.Sampling()
	}
	return nil
}

// flushed handles the end of a flush: the profile's end, the old file's
// completion, or a switch asked for.
func (r *profRun) flushed() (done bool, err error) {
	switch {
	case r.end.isStopped():
		return true, nil
	case r.old != nil && r.dumpEnd != 0:
		old := r.old
		r.old = nil
		if err := r.close(old, nil); err != nil {
			return true, err
		}
		r.sw.done()
	case r.old == nil && r.sw.asked.Load():
		if err := r.endRounds(); err != nil {
			return true, err
		}
		r.sw.begin()
		r.old = r.cur
		if err := r.open(false); err != nil {
			return true, err
		}
	}
	return false, nil
}

func (r *profRun) endRounds() error {
	for _, f := range []*profFile{r.old, r.cur} {
		if f == nil {
			continue
		}
		if err := f.endRound(); err != nil {
			return err
		}
	}
	return nil
}

// finish closes off the open files, after err if any.
func (r *profRun) finish(err error) error {
	for _, f := range []*profFile{r.old, r.cur} {
		if f == nil {
			continue
		}
		if cerr := r.close(f, err); err == nil {
			err = cerr
		}
	}
	r.old, r.cur = nil, nil
	return err
}

// close closes off a file: its last round, its header tables, the
// header; err is the error that ended its records, if any.
func (r *profRun) close(f *profFile, err error) error {
	if err == nil {
		err = f.endRound()
	}
	t := f.dump
	t.Merge(f.live.Result(false, !r.p.so.NoBuildID))
	err = finishPerfData(f.w, f.host, t, err)
	if cerr := f.close(); err == nil && cerr != nil {
		err = fmt.Errorf("close output: %w", cerr)
	}
	return err
}
