package synth

import (
	"context"

	"github.com/synth-dev/synth/internal/method/bpfmethod"
)

// BPF is the BPF method without the live side-band, with what the
// method underneath says of its walk (Walk).
type BPF struct {
	*bpfmethod.BPF
	m *Method
}

// NewBPF opens the BPF method without the live side-band, for tests of
// its walks.
func NewBPF(opts Options) (*BPF, error) {
	d, err := resolve(&opts)
	if err != nil {
		return nil, err
	}
	b, err := bpfmethod.New(d)
	if err != nil {
		return nil, err
	}
	m := &Method{name: MethodBPF, partial: d.Partial(), d: withAttrs{m: b, attrs: optionAttrs(d)}}
	return &BPF{BPF: b, m: m}, nil
}

// Method is b as a Method, for WritePerfData and Snapshot.
func (b *BPF) Method() *Method { return b.m }

// Dump is Method.Dump.
func (b *BPF) Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error) {
	return b.m.Dump(ctx, emit)
}

// RefuseProgram makes a BPF program fail to load, as on a kernel that
// lacks what it needs, until restore is called.
func RefuseProgram(name string) (restore func()) { return bpfmethod.RefuseProgram(name) }

// ReadAt returns when the last dump first read process pid, as the
// Superseded rule compares live records with it.
func (s *Session) ReadAt(pid uint32) (uint64, bool) {
	if s.read == nil {
		return 0, false
	}
	_, readAt := s.read.Times()
	at, ok := readAt[pid]
	return at, ok
}

// HookPoint is where in a dump SetExitHook's fn runs.
type HookPoint = bpfmethod.HookPoint

const (
	HookRead   = bpfmethod.HookRead
	HookPassed = bpfmethod.HookPassed
	HookWalked = bpfmethod.HookWalked
)

// SetExitHook has fn run once in each of the session's dumps, at point
// at for process pid (see bpfmethod.BPF.SetExitHook).
func (s *Session) SetExitHook(pid uint32, at HookPoint, fn func()) { s.b.SetExitHook(pid, at, fn) }
