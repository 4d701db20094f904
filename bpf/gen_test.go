package bpf

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

var update = flag.Bool("update", false, "regenerate the committed bindings (make generate)")

// generated are the bpf2go outputs committed next to the C sources.
var generated = []string{"synth_bpfel.go", "synth_bpfel.o", "floor_bpfel.go", "floor_bpfel.o"}

// TestGeneratedUpToDate regenerates the bindings from the C sources in a
// scratch copy of the module and fails when they differ from the
// committed ones: whoever edits synth.bpf.c must run make generate, which
// runs this test with -update to copy the new files back.
//
// The scratch directory has a short fixed-length path: clang-19 orders
// BTF types differently when the source directory's path is long (seen
// from about 34 characters), so generating in place or in t.TempDir()
// would not reproduce the committed bytes.
func TestGeneratedUpToDate(t *testing.T) {
	var src []string
	_, err := exec.LookPath("clang-19")
	testenv.Need(t, err == nil, "clang-19 is not installed (make deps installs it)")
	if testing.Short() {
		t.Skip("regenerating BPF objects is slow")
	}
	root, err := os.MkdirTemp("/tmp", "synth-gen")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	mustCopy(t, "../go.mod", filepath.Join(root, "go.mod"))
	mustCopy(t, "../go.sum", filepath.Join(root, "go.sum"))
	src, err = filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range src {
		switch filepath.Ext(name) {
		case ".c", ".h":
		default:
			if name != "gen.go" && name != "doc.go" {
				continue
			}
		}
		mustCopy(t, name, filepath.Join(root, "bpf", name))
	}
	cmd := exec.Command("go", "generate", "./bpf")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go generate: %v\n%s", err, out)
	}
	for _, name := range generated {
		want, err := os.ReadFile(filepath.Join(root, "bpf", name))
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(name, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s does not match its sources: run make generate and commit the result", name)
		}
	}
}

func mustCopy(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
