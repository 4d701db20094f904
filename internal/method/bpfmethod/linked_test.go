package bpfmethod

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/kcache"
	"github.com/synth-dev/synth/internal/testenv"
)

// cachedNames are the programs the kernel cache is tried with: a dump's
// (the maple walk's where the kernel can run it) and a Session's, its
// unmap programs among them, each loaded where this kernel loads it.
var cachedNames = func() []string {
	names := []string{
		synthbpf.SynthProgProbe, synthbpf.SynthProgDumpTasks, synthbpf.SynthProgDumpTask,
		synthbpf.SynthProgDumpVma, synthbpf.SynthProgSessionProbe, synthbpf.SynthProgNoteReader,
	}
	for _, h := range unmapHooks {
		names = append(names, h.prog)
	}
	return names
}()

// loadTags loads the programs names with a kernel cache in dir and
// returns the kernel's tag of each that loads, by name, and the steps
// loading took; missed (if not nil) is set to why the cache missed.
func loadTags(t *testing.T, dir string, names []string, missed ...*error) (map[string]string, []string) {
	t.Helper()
	o, err := loadObjects(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	tags := make(map[string]string)
	for _, name := range names {
		p, err := o.program(name)
		if err != nil {
			continue // a program this kernel does not load (dump_tasks before 6.14)
		}
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		tags[name] = info.Tag
	}
	if len(missed) > 0 {
		*missed[0] = o.linked.takeMissed()
	}
	var steps []string
	for _, s := range o.takeSteps() {
		steps = append(steps, s.Name)
	}
	return tags, steps
}

// The first load with a kernel cache links the programs against the
// kernel's BTF and keeps them; the next loads each from the cache,
// without the kernel's BTF, and the kernel is given the same
// instructions (the same tag) as cilium/ebpf gave it.
func TestKernelCache(t *testing.T) {
	testenv.Root(t)
	if _, err := kcache.CurrentKey(objectKey()); err != nil {
		t.Logf("not checked: no kernel cache on this kernel (no build ID, or no BTF): %v", err)
		return
	}
	dir := filepath.Join(t.TempDir(), "kc")
	cold, steps := loadTags(t, dir, cachedNames)
	if len(cold) == 0 {
		t.Fatal("no program loaded")
	}
	if !slices.Contains(steps, "kernel BTF") {
		t.Errorf("a cold load did not parse the kernel's BTF: %v", steps)
	}
	warm, steps := loadTags(t, dir, cachedNames)
	for name, tag := range cold {
		if warm[name] != tag {
			t.Errorf("%s: tag %s from the cache, %s linked by cilium/ebpf", name, warm[name], tag)
		}
		if !slices.Contains(steps, name+" (cached)") {
			t.Errorf("%s not loaded from the cache: %v", name, steps)
		}
	}
	if slices.Contains(steps, "kernel BTF") {
		t.Errorf("a warm load parsed the kernel's BTF: %v", steps)
	}
	t.Logf("cached: %v", slices.Sorted(func(yield func(string) bool) {
		for name := range cold {
			if !yield(name) {
				return
			}
		}
	}))
}

// Whatever is wrong with the cache, the programs loaded are those
// cilium/ebpf links (the same tags) and the cache is whole again after:
// the failure costs a cold load, nothing else.
func TestKernelCacheFailures(t *testing.T) {
	testenv.Root(t)
	key, err := kcache.CurrentKey(objectKey())
	if err != nil {
		t.Logf("not checked: no kernel cache on this kernel (no build ID, or no BTF): %v", err)
		return
	}
	names := []string{synthbpf.SynthProgProbe, synthbpf.SynthProgDumpVma}
	want, _ := loadTags(t, "", names)
	for _, tc := range []struct {
		name string
		// spoil spoils the file of the program name in dir; it is
		// called for each program.
		spoil func(t *testing.T, dir, name, file string)
		kept  bool // the spoiled cache is whole again after the load
	}{
		{name: "missing", spoil: func(t *testing.T, dir, name, file string) { os.Remove(file) }, kept: true},
		{name: "other kernel", kept: true, spoil: func(t *testing.T, dir, name, file string) {
			c, err := kcache.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			other := key
			other.Kernel = append([]byte{key.Kernel[0] ^ 1}, key.Kernel[1:]...)
			p, err := c.Load(key, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Store(other, name, p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "corrupt", kept: true, spoil: func(t *testing.T, dir, name, file string) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		// A whole entry the kernel refuses: the code of another build
		// of the kernel, say. Its load fails, and the program is linked
		// afresh.
		{name: "refused by the kernel", kept: true, spoil: func(t *testing.T, dir, name, file string) {
			c, err := kcache.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.Load(key, name)
			if err != nil {
				t.Fatal(err)
			}
			p.Code[0] = 0xff // no such opcode
			if err := c.Store(key, name, p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "another user's", kept: true, spoil: func(t *testing.T, dir, name, file string) {
			if err := os.Chown(file, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "directory others can reach", spoil: func(t *testing.T, dir, name, file string) {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "unwritable", spoil: func(t *testing.T, dir, name, file string) {
			// A directory that cannot be written even by root: a
			// file in its place.
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "kc")
			loadTags(t, dir, names) // fills it
			for _, name := range names {
				tc.spoil(t, dir, name, filepath.Join(dir, "programs-"+hex.EncodeToString(key.Object[:8])+"-"+name))
			}
			var missed error
			got, steps := loadTags(t, dir, names, &missed)
			if missed == nil {
				t.Error("the cache missed and did not say why")
			} else {
				t.Logf("missed: %v", missed)
			}
			for name, tag := range want {
				if got[name] != tag {
					t.Errorf("%s: tag %s, want %s", name, got[name], tag)
				}
			}
			if !slices.ContainsFunc(steps, func(s string) bool { return !strings.HasSuffix(s, "(cached)") && slices.Contains(names, s) }) {
				t.Errorf("no program linked afresh: %v", steps)
			}
			if !tc.kept {
				return
			}
			_, steps = loadTags(t, dir, names)
			for name := range want {
				if !slices.Contains(steps, name+" (cached)") {
					t.Errorf("after the failure, %s not cached: %v", name, steps)
				}
			}
		})
	}
}
