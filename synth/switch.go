package synth

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synth-dev/synth/perfdata"
)

// SwitchOptions say when a profile closes its output and starts a new
// one, as perf record --switch-output does. Each file starts with a
// fresh dump of the state, so that each reads alone. The zero value
// never switches.
type SwitchOptions struct {
	Signal <-chan os.Signal // a switch each time it receives (perf: SIGUSR2)
	Size   int64            // once a file holds this many bytes; 0: never
	Every  time.Duration    // this often; 0: never
}

func (o SwitchOptions) active() bool { return o.Signal != nil || o.Size > 0 || o.Every > 0 }

// Output opens the next file of a profile: its writer, and the function
// that closes it once it is complete.
type Output func() (w io.Writer, close func() error, err error)

// switcher asks the session for a switch: it flushes it, so that the
// file being written ends with what the rings hold then, and notes the
// time; the next file's dump ends the switch.
type switcher struct {
	s      *Session
	size   int64
	ticker *time.Ticker // nil: no time switches
	asked  atomic.Bool
	mu     sync.Mutex
	at     time.Time // when the last switch was asked
	// making is set from a switch's start to its new dump's end, made
	// is the time of its ask.
	making bool
	made   time.Time
	stalls []time.Duration // from each switch's ask to its dump's end
	quit   chan struct{}
	wg     sync.WaitGroup
}

func startSwitcher(s *Session, o SwitchOptions) *switcher {
	sw := &switcher{s: s, size: o.Size, quit: make(chan struct{})}
	var tick <-chan time.Time
	if o.Every > 0 {
		sw.ticker = time.NewTicker(o.Every)
		tick = sw.ticker.C
	}
	if o.Signal == nil && tick == nil {
		return sw
	}
	sw.wg.Add(1)
	go func() {
		defer sw.wg.Done()
		for {
			select {
			case <-o.Signal:
			case <-tick:
			case <-sw.quit:
				return
			}
			sw.ask()
		}
	}()
	return sw
}

// ask asks for a switch, unless one is being made.
func (sw *switcher) ask() {
	if sw.asked.CompareAndSwap(false, true) {
		sw.mu.Lock()
		sw.at = time.Now()
		sw.mu.Unlock()
		sw.s.Flush()
	}
}

// wrote asks for a switch once a file has reached the size, its dump
// left out.
func (sw *switcher) wrote(size int64) {
	if sw.size > 0 && size >= sw.size {
		sw.ask()
	}
}

// begin starts the switch asked for.
func (sw *switcher) begin() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.making, sw.made = true, sw.at
}

// done ends a switch: its old file is closed. Asks made meanwhile were
// for it; a switch may be asked for again from now on.
func (sw *switcher) done() { sw.asked.Store(false) }

// dumped ends a switch: the new file's dump is written.
func (sw *switcher) dumped() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.making {
		sw.stalls = append(sw.stalls, time.Since(sw.made))
		sw.making = false
	}
}

func (sw *switcher) stop() {
	close(sw.quit)
	sw.wg.Wait()
	if sw.ticker != nil {
		sw.ticker.Stop()
	}
}

func (sw *switcher) stallTimes() []time.Duration {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.stalls
}

// RunSwitching profiles as Run does into the files next opens, one after
// the other, switching as o says. Each file starts with a dump of the
// state at its start, so that each reads alone: perf report of any of
// them attributes its samples. At a switch the new file's dump runs while
// the old file takes the samples: it ends when that dump does, and the
// side-band records of the dump's time go to both, so that no sample
// lands in a file that lacks its mapping. An error of one file ends the
// profile; what was written stays readable.
func (p *Profiler) RunSwitching(ctx context.Context, next Output, o SwitchOptions, wopts WriteOptions) (ProfileStats, error) {
	s := p.s
	defer s.Close()
	if o.active() && wopts.Mode == perfdata.ModePipe {
		return ProfileStats{}, errors.New("switch output: not in pipe mode")
	}
	end := &sampleSwitch{s: s, onExec: p.opts.OnExec}
	defer end.endOn(ctx)()
	sw := startSwitcher(s, o)
	defer sw.stop()
	r := &profRun{p: p, ctx: ctx, next: next, wopts: wopts, end: end, sw: sw}
	err := r.run()
	return ProfileStats{Session: s.Stats(), Dump: s.LastDump(), Duration: time.Since(p.start),
		Files: r.files, SwitchStalls: sw.stallTimes()}, err
}
