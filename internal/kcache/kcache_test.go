package kcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func testKey() Key {
	return Key{
		Kernel:  []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		BTFSize: 5519912,
		Object:  [32]byte{1, 2, 3},
	}
}

func testPrograms() map[string]Program {
	return map[string]Program{
		"dump_tasks": {Code: bytes.Repeat([]byte{0x85, 0, 0, 0, 1, 0, 0, 0}, 3), AttachID: 123456,
			BTF: []byte{0x9f, 0xeb, 1, 0}, FuncInfo: []byte{0, 0, 0, 0, 1, 0, 0, 0}, LineInfo: []byte{1, 2, 3}},
		"probe": {Code: []byte{0x95, 0, 0, 0, 0, 0, 0, 0}},
	}
}

func openTemp(t *testing.T) *Cache {
	t.Helper()
	c, err := Open(filepath.Join(t.TempDir(), "synth"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStoreLoad(t *testing.T) {
	c := openTemp(t)
	k := testKey()
	storeAll(t, c, k, testPrograms())
	progs, err := loadAll(c, k, testPrograms())
	if err != nil || !reflect.DeepEqual(progs, testPrograms()) {
		t.Fatalf("Load = %+v, %v; want %+v", progs, err, testPrograms())
	}
	if _, err := c.Load(k, "other"); !errors.Is(err, ErrMiss) {
		t.Errorf("a program not stored: %v", err)
	}
	for _, bad := range []string{"", "..", "a/b", strings.Repeat("x", maxName+1)} {
		if _, err := c.Load(k, bad); !errors.Is(err, ErrMiss) {
			t.Errorf("Load(%q): %v", bad, err)
		}
		if err := c.Store(k, bad, testPrograms()["probe"]); err == nil {
			t.Errorf("Store(%q) took the name", bad)
		}
	}
	st, err := os.Stat(c.path(k.Object, "probe"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("file %v %v", st.Mode(), err)
	}
	dst, err := os.Stat(c.dir)
	if err != nil || dst.Mode().Perm() != 0o700 {
		t.Errorf("directory %v %v", dst.Mode(), err)
	}
}

// Every key field, the file's checks, and a file that is not there:
// each a miss, with nothing of the file returned.
func TestMiss(t *testing.T) {
	le := binary.LittleEndian
	for _, tc := range []struct {
		name string
		key  func(*Key)          // the key the file is read with
		file func([]byte) []byte // what becomes of the file stored
		mode os.FileMode
	}{
		{name: "missing"},
		{name: "other kernel", key: func(k *Key) { k.Kernel = []byte{1, 2, 3} }},
		{name: "other kernel BTF", key: func(k *Key) { k.BTFSize++ }},
		{name: "other object", key: func(k *Key) { k.Object[31] = 1 }},
		{name: "code changed", file: func(b []byte) []byte { b[len(b)-40] ^= 1; return b }},
		{name: "magic", file: func(b []byte) []byte { b[0] = 'S'; return b }},
		{name: "version", file: func(b []byte) []byte { b[offVersion] = 2; return b }},
		{name: "short", file: func(b []byte) []byte { return b[:len(b)-1] }},
		{name: "empty", file: func(b []byte) []byte { return nil }},
		{name: "long", file: func(b []byte) []byte { return append(b, 0) }},
		{name: "another program's", file: func(b []byte) []byte {
			b[headerSize+2] = 'D' // dump_tasks -> Dump_tasks
			return resum(b)
		}},
		{name: "code past the end", file: func(b []byte) []byte {
			le.PutUint32(b[headerSize+2+len("dump_tasks")+4:], 1<<30) // the code's length
			return resum(b)
		}},
		{name: "past MaxSize", file: func(b []byte) []byte { return append(b, make([]byte, MaxSize)...) }},
		{name: "writable by others", mode: 0o622},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openTemp(t)
			k := testKey()
			if tc.name != "missing" {
				storeAll(t, c, k, testPrograms())
			}
			path := c.path(k.Object, "dump_tasks")
			if tc.file != nil {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, tc.file(b), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.mode != 0 {
				if err := os.Chmod(path, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			if tc.key != nil {
				tc.key(&k)
			}
			p, err := c.Load(k, "dump_tasks")
			if !errors.Is(err, ErrMiss) || p.Code != nil {
				t.Errorf("Load = %+v, %v; want a miss", p, err)
			}
			// What the caller then does: link the program and
			// store it, over whatever was there.
			storeAll(t, c, k, testPrograms())
			if progs, err := loadAll(c, k, testPrograms()); err != nil || !reflect.DeepEqual(progs, testPrograms()) {
				t.Errorf("after a new store: %+v, %v", progs, err)
			}
		})
	}
}

// resum writes b's checksum anew, so that a check past it is reached.
func resum(b []byte) []byte {
	body := b[:len(b)-32]
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

// A directory that is not root's alone is not used; one that cannot be
// written fails the store and nothing else.
func TestDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil {
		t.Error("Open took a directory others can read")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(file); err == nil {
		t.Error("Open took a file for a directory")
	}
	if _, err := Open(filepath.Join(file, "sub")); err == nil {
		t.Error("Open made a directory under a file")
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link); err == nil {
		t.Error("Open followed a symlink")
	}

	// Unwritable: the directory went away (root writes through any mode).
	c := openTemp(t)
	if err := os.RemoveAll(c.dir); err != nil {
		t.Fatal(err)
	}
	if err := c.Store(testKey(), "probe", testPrograms()["probe"]); err == nil {
		t.Error("Store into a removed directory succeeded")
	}
	if _, err := c.Load(testKey(), "probe"); !errors.Is(err, ErrMiss) {
		t.Errorf("Load after a failed store: %v", err)
	}
}

func TestFileOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file away")
	}
	c := openTemp(t)
	k := testKey()
	storeAll(t, c, k, testPrograms())
	if err := os.Chown(c.path(k.Object, "probe"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(k, "probe"); !errors.Is(err, ErrMiss) {
		t.Errorf("Load of another user's file: %v", err)
	}
}

func TestCurrentKey(t *testing.T) {
	dir := t.TempDir()
	set := func(v *string, name string, b []byte) {
		old := *v
		*v = filepath.Join(dir, name)
		t.Cleanup(func() { *v = old })
		if err := os.WriteFile(*v, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A GNU build-ID note as /sys/kernel/notes lays it out (the
	// machine's byte order; this one is little-endian).
	note := []byte{4, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0, 0xca, 0xfe, 0xf0, 0x0d}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the note is little-endian")
	}
	set(&kernelNotes, "notes", note)
	set(&vmlinuxBTF, "vmlinux", make([]byte, 100))
	k, err := CurrentKey([32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	want := Key{Kernel: []byte{0xca, 0xfe, 0xf0, 0x0d}, BTFSize: 100, Object: [32]byte{7}}
	if !reflect.DeepEqual(k, want) {
		t.Errorf("CurrentKey = %+v, want %+v", k, want)
	}
	set(&kernelNotes, "notes", nil)
	if _, err := CurrentKey([32]byte{7}); err == nil {
		t.Error("a kernel without a build ID has a key")
	}
}

// The running kernel's key, where it has one.
func TestCurrentKeyHost(t *testing.T) {
	k, err := CurrentKey([32]byte{})
	if err != nil {
		t.Skipf("no key on this host: %v", err)
	}
	if len(k.Kernel) < 16 || k.BTFSize == 0 {
		t.Errorf("key %+v", k)
	}
}

// decode takes any bytes: a miss or a program within the caps, never a
// panic or an allocation past MaxSize.
func FuzzDecode(f *testing.F) {
	good, err := encode(testKey(), "dump_tasks", testPrograms()["dump_tasks"])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:headerSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decode(resumFuzz(b), testKey(), "dump_tasks")
		if err != nil {
			return
		}
		if len(p.Code) == 0 || len(p.Code)%8 != 0 {
			t.Fatalf("program of %d bytes", len(p.Code))
		}
	})
}

// resumFuzz gives b a valid checksum, so that the fuzzer reaches the
// checks past it.
func resumFuzz(b []byte) []byte {
	if len(b) < 32 {
		return b
	}
	return resum(bytes.Clone(b))
}

// storeAll stores progs under k.
func storeAll(t *testing.T, c *Cache, k Key, progs map[string]Program) {
	t.Helper()
	for name, p := range progs {
		if err := c.Store(k, name, p); err != nil {
			t.Fatal(err)
		}
	}
}

// loadAll loads the programs of names' keys under k; the first miss is
// the error.
func loadAll(c *Cache, k Key, names map[string]Program) (map[string]Program, error) {
	got := make(map[string]Program)
	for name := range names {
		p, err := c.Load(k, name)
		if err != nil {
			return nil, err
		}
		got[name] = p
	}
	return got, nil
}

// TestSymlink: a link in the directory is not an entry, even to a
// good file of the same user, which another user's link could name.
func TestSymlink(t *testing.T) {
	elsewhere := openTemp(t)
	c := openTemp(t)
	k := testKey()
	storeAll(t, elsewhere, k, testPrograms())
	if err := os.Symlink(elsewhere.path(k.Object, "probe"), c.path(k.Object, "probe")); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Load(k, "probe"); !errors.Is(err, ErrMiss) {
		t.Errorf("Load through a symlink = %+v, %v; want a miss", p, err)
	}
}

// TestFIFO: a FIFO in the directory is a miss at once, not an open
// that waits for a writer.
func TestFIFO(t *testing.T) {
	c := openTemp(t)
	k := testKey()
	path := c.path(k.Object, "probe")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Load(k, "probe")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrMiss) {
			t.Errorf("Load of a FIFO: %v, want a miss", err)
		}
	case <-time.After(10 * time.Second):
		// Free the blocked open: a writer that opens and closes.
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("Load blocked on a FIFO (freed by a writer after 10 s)")
	}
}

// TestPrune: another object's old files go; this object's, another's
// recent ones and files that are not the cache's stay.
func TestPrune(t *testing.T) {
	c := openTemp(t)
	own, recent, old := testKey(), testKey(), testKey()
	recent.Object[0], old.Object[0] = 0xaa, 0xbb
	for _, k := range []Key{own, recent, old} {
		storeAll(t, c, k, testPrograms())
	}
	now := time.Now()
	ago := now.Add(-MaxAge - time.Hour)
	other := filepath.Join(c.dir, "notes.txt")
	temp := filepath.Join(c.dir, tempPrefix+"123")
	for _, p := range []string{other, temp} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{c.path(own.Object, "probe"), c.path(old.Object, "probe"), c.path(old.Object, "dump_tasks"), other, temp} {
		if err := os.Chtimes(p, ago, ago); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.Prune(own.Object, now, MaxAge)
	if err != nil || n != 3 {
		t.Errorf("Prune = %d, %v; want 3 files removed", n, err)
	}
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	want := []string{"notes.txt", "programs-0102030000000000-dump_tasks", "programs-0102030000000000-probe",
		"programs-aa02030000000000-dump_tasks", "programs-aa02030000000000-probe"}
	if !reflect.DeepEqual(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
}
