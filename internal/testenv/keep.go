package testenv

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Keep copies the file at path into a directory of its own that
// outlives the test (os.MkdirTemp("", "synth-perf-fail-*")), and returns
// a phrase for a failure message: where the copy is, or why there is
// none. It is for a file a test handed to perf, to be looked at once the
// test's temporary directories are gone.
func Keep(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "not kept: " + err.Error()
	}
	defer f.Close()
	return keep(filepath.Base(path), f)
}

// KeepData is Keep for bytes a test handed to perf on its stdin, kept
// under name.
func KeepData(name string, b []byte) string {
	return keep(name, bytes.NewReader(b))
}

func keep(name string, r io.Reader) string {
	dir, err := os.MkdirTemp("", "synth-perf-fail-*")
	if err != nil {
		return "not kept: " + err.Error()
	}
	dst := filepath.Join(dir, name)
	out, err := os.Create(dst)
	if err == nil {
		_, err = io.Copy(out, r)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return "not kept: " + err.Error()
	}
	return "kept as " + dst
}

// kept are the files KeepOnFailure watches, by test, so that a helper
// that runs perf on a file several times watches it once.
var kept sync.Map // struct{testing.TB; string} -> bool

// KeepOnFailure keeps the file at path (see Keep) if t has failed when
// it ends, and logs where. The copy is of the file as it is then; call
// it once the file's directory exists, so that the directory's removal
// (t.TempDir's cleanup, registered first) runs after the copy.
func KeepOnFailure(t testing.TB, path string) {
	t.Helper()
	key := struct {
		testing.TB
		string
	}{t, path}
	if _, dup := kept.LoadOrStore(key, true); dup {
		return
	}
	t.Cleanup(func() {
		defer kept.Delete(key)
		if t.Failed() {
			t.Logf("%s: %s", path, Keep(path))
		}
	})
}
