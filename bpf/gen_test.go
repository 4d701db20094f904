package bpf

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

var update = flag.Bool("update", false, "regenerate the committed bindings (make generate)")

// generated are the bpf2go outputs committed next to their C sources,
// by directory from the module's root: the dump's object here, and the
// benchmark floor's, which compiles this directory's walk.bpf.h with
// SYNTH_WALK_ONLY, in synth bench's package.
var generated = map[string][]string{
	"bpf":                            {"synth_bpfel.go", "synth_bpfel.o"},
	"cmd/synth/internal/bench/floor": {"floor_bpfel.go", "floor_bpfel.o"},
}

// TestGeneratedUpToDate regenerates the bindings from the C sources in a
// scratch copy of the module and fails when they differ from the
// committed ones: whoever edits a .c or .h of either directory must run
// make generate, which runs this test with -update to copy the new files
// back.
//
// The scratch directory has a short fixed-length path: clang-19 orders
// BTF types differently when the source directory's path is long (seen
// from about 34 characters), so generating in place or in t.TempDir()
// would not reproduce the committed bytes. (The floor's directory lies
// deeper; its object came out the same from roots of 7 to 50
// characters.)
func TestGeneratedUpToDate(t *testing.T) {
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
	dirs := slices.Sorted(maps.Keys(generated))
	args := []string{"generate"}
	for _, dir := range dirs {
		src, err := filepath.Glob(filepath.Join("..", dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range src {
			switch base := filepath.Base(name); filepath.Ext(base) {
			case ".c", ".h":
			default:
				if base != "gen.go" && base != "doc.go" {
					continue
				}
			}
			mustCopy(t, name, filepath.Join(root, dir, filepath.Base(name)))
		}
		args = append(args, "./"+dir)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go generate: %v\n%s", err, out)
	}
	for _, dir := range dirs {
		for _, name := range generated[dir] {
			want, err := os.ReadFile(filepath.Join(root, dir, name))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("..", dir, name)
			if *update {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s does not match its sources: run make generate and commit the result", filepath.Join(dir, name))
			}
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
