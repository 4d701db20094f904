package bpfmethod

import (
	"crypto/sha256"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/kcache"
)

// objectKey is what the kernel cache keys the object on: its SHA-256,
// and the version of cilium/ebpf that links it, which a later one may
// do otherwise. A binary without module information (a test's) keys on
// the object alone, and so keeps a file of its own.
var objectKey = sync.OnceValue(func() [32]byte {
	h := sha256.New()
	obj := synthbpf.SynthHash()
	h.Write(obj[:])
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/cilium/ebpf" {
				h.Write([]byte(d.Version))
			}
		}
	}
	return [32]byte(h.Sum(nil))
})

// linkedPrograms are the object's programs as linked against the
// running kernel, from the kernel cache and for it: each program's file
// is read when the program is first asked for. A nil *linkedPrograms
// has none and keeps none.
type linkedPrograms struct {
	c    *kcache.Cache // nil: none to read or keep programs in
	key  kcache.Key
	mu   sync.Mutex
	read map[string]kcache.Program // read by has, for get
	// missed says why the cache did not have a program (for synth dump
	// -v), or why one of it was dropped; nil when it served.
	missed      error
	storeFailed bool // missed says a store failed
}

// openLinked returns the programs of the cache in dir for this kernel
// and object; nil when dir is "". A kernel without a key (no build ID,
// or no BTF) or a cache that cannot be opened has none, and says why in
// missed.
func openLinked(dir string) *linkedPrograms {
	if dir == "" {
		return nil
	}
	l := &linkedPrograms{}
	key, err := kcache.CurrentKey(objectKey())
	if err != nil {
		l.missed = err
		return l
	}
	c, err := kcache.Open(dir)
	if err != nil {
		l.missed = err
		return l
	}
	c.Prune(key.Object, time.Now(), kcache.MaxAge) // a file not pruned is pruned next time
	l.c, l.key = c, key
	return l
}

// takeMissed returns why the cache missed, or dropped a program, once;
// nil if it did not.
func (l *linkedPrograms) takeMissed() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.missed
	l.missed = nil
	return err
}

// get returns the program name as linked, if the cache has it: the one
// has read, else read now.
func (l *linkedPrograms) get(name string) (kcache.Program, bool) {
	if l == nil || l.c == nil {
		return kcache.Program{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.read[name]; ok {
		delete(l.read, name)
		return p, true
	}
	return l.load(name)
}

// has reports whether the cache has the program name, and keeps what
// it read for get.
func (l *linkedPrograms) has(name string) bool {
	if l == nil || l.c == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.load(name)
	if ok {
		if l.read == nil {
			l.read = make(map[string]kcache.Program)
		}
		l.read[name] = p
	}
	return ok
}

// load reads the program name from the cache, noting why it missed.
func (l *linkedPrograms) load(name string) (kcache.Program, bool) {
	p, err := l.c.Load(l.key, name)
	if err != nil {
		if l.missed == nil {
			l.missed = err
		}
		return kcache.Program{}, false
	}
	return p, true
}

// drop notes that the program name, from the cache, failed to load for
// why: the caller links it afresh, and keeps that over it.
func (l *linkedPrograms) drop(why error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.missed = why
}

// keep links the program name of spec against kernel and, if that is
// the program p cilium/ebpf loaded, stores it in the cache. It never
// fails: a program not kept is linked again by the next synth.
func (l *linkedPrograms) keep(spec *ebpf.CollectionSpec, name string, kernel *btf.Spec, p *ebpf.Program) {
	if l == nil || l.c == nil {
		return
	}
	insns, attach, err := linkProgram(spec, spec.Programs[name], kernel)
	if err != nil {
		return
	}
	kept, err := linked(spec.Programs[name], insns, attach, p)
	if err != nil {
		return
	}
	err = l.c.Store(l.key, name, kept)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil && !l.storeFailed { // the next synth misses it too
		l.storeFailed = true
		l.missed = fmt.Errorf("%v; not kept: %w", l.missed, err)
	}
}

// loadCached loads the program name from the kernel cache, or returns
// nil when the cache does not have it or its load fails (the caller
// then links it afresh, and keeps that).
func (o *objects) loadCached(name string, ps *ebpf.ProgramSpec) *ebpf.Program {
	if ps != o.spec.Programs[name] { // a refused one (RefuseProgram)
		return nil
	}
	start := time.Now()
	l, ok := o.linked.get(name)
	if !ok {
		return nil
	}
	p, err := loadLinked(ps, l, o.shared)
	if err != nil {
		o.linked.drop(fmt.Errorf("%s: %w", name, err))
		return nil
	}
	o.step(name+" (cached)", start)
	return p
}
