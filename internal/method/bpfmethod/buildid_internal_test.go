package bpfmethod

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/hostarch"
	"github.com/synth-dev/synth/internal/testenv"
)

// A file new to the cache is read through the mapping the walk noted;
// when that mapping is gone (a short-lived child mapped the file first),
// through another process's mapping of it, which resolvePending asks
// for only then.
func TestResolvePendingOthers(t *testing.T) {
	testenv.Root(t)
	lib := filepath.Join(hostarch.LibDir(), "libc.so.6")
	f, err := os.Open(lib)
	testenv.Need(t, err == nil, "no "+lib)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	want, err := elfnote.BuildID(f, st.Size)
	if err != nil || len(want) == 0 {
		t.Fatalf("%s: build ID %x, %v", lib, want, err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	here := buildid.Mapping{Pid: os.Getpid(), Start: uint64(uintptr(unsafe.Pointer(&m[0])))}
	here.End = here.Start + uint64(os.Getpagesize())

	b, err := New(config.Resolved{Options: config.Options{NoKernel: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	key := synthbpf.SynthSynthFileKey{Ino: st.Ino, Dev: unix.Major(st.Dev)<<20 | unix.Minor(st.Dev),
		CtimeSec: st.Ctim.Sec, CtimeNsec: uint32(st.Ctim.Nsec), MtimeSec: st.Mtim.Sec, MtimeNsec: uint32(st.Mtim.Nsec)}
	for _, tc := range []struct {
		name   string
		noted  buildid.Mapping
		others []buildid.Mapping // nil: others must not be asked
	}{
		{"noted mapping gone", buildid.Mapping{Pid: os.Getpid(), Start: 0x1000, End: 0x2000}, []buildid.Mapping{here}},
		{"noted mapping there", here, nil},
	} {
		b.lo.objs.BuildIds.Delete(&key)
		pend := synthbpf.SynthSynthPending{Start: tc.noted.Start, End: tc.noted.End, Pid: uint32(tc.noted.Pid)}
		if err := b.lo.objs.Pending.Put(&key, &pend); err != nil {
			t.Fatal(err)
		}
		asked := false
		d := assemble.New(b.opts, func([]byte) error { return nil }, nil)
		expired, stop := b.ids.begin()
		ids, err := b.ids.resolvePending(d, func(fileIdent) []buildid.Mapping {
			asked = true
			return tc.others
		}, expired)
		stop()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids[identOfKey(&key)]; !bytes.Equal(got, want) {
			t.Errorf("%s: build ID %x, want %x", tc.name, got, want)
		}
		if asked != (tc.others != nil) {
			t.Errorf("%s: others asked: %v", tc.name, asked)
		}
		var cached synthbpf.SynthSynthBuildId
		if err := b.lo.objs.BuildIds.Lookup(&key, &cached); err != nil || !bytes.Equal(cached.Id[:cached.Size], want) {
			t.Errorf("%s: cached %x (%v)", tc.name, cached.Id[:cached.Size], err)
		}
	}
}
