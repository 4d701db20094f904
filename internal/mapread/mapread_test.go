package mapread

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/hostarch"
	"github.com/synth-dev/synth/internal/testenv"
)

var libc = filepath.Join(hostarch.LibDir(), "libc.so.6")

// mapLibc maps libc and returns the map_files entry of the mapping and
// the file's stat.
func mapLibc(t *testing.T) (string, unix.Stat_t) {
	t.Helper()
	f, err := os.Open(libc)
	testenv.Need(t, err == nil, "no "+libc)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	m, err := unix.Mmap(int(f.Fd()), 0, page, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	start := uint64(uintptrOf(m))
	end := start + uint64(page)
	_, err = os.Stat(Path(os.Getpid(), start, end))
	testenv.Need(t, err == nil, "map_files entries need CAP_SYS_ADMIN: test needs root")
	return Path(os.Getpid(), start, end), st
}

// The helper process reads what this process reads, and a helper that
// is killed is replaced at the next read.
func TestHelperReadsAsRead(t *testing.T) {
	path, st := mapLibc(t)
	local := Read(path)
	if !local.Opened || !local.Read || len(local.ID) == 0 {
		t.Fatalf("read in process: %+v", local)
	}
	if local.Before.Ino != st.Ino || local.Before.Dev != st.Dev || local.After != local.Before {
		t.Errorf("stat %+v / %+v, file dev %d ino %d", local.Before, local.After, st.Dev, st.Ino)
	}
	var h Helper
	defer h.Close()
	for round := range 2 {
		got, err := h.Read(path)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !bytes.Equal(got.ID, local.ID) || got.Before != local.Before || got.FsType != local.FsType {
			t.Errorf("round %d: helper read %+v, this process %+v", round, got, local)
		}
		if got, _ := h.Read("/proc/self/map_files/0-1"); got.Opened {
			t.Errorf("round %d: a missing entry opened: %+v", round, got)
		}
		// Kill the helper: the next round starts another.
		h.mu.Lock()
		p := h.cur
		h.mu.Unlock()
		p.cmd.Process.Kill()
		p.cmd.Process.Wait()
		for !func() bool { h.mu.Lock(); defer h.mu.Unlock(); return p.gone }() {
			time.Sleep(time.Millisecond)
		}
	}
	h.Close()
	if _, err := h.Read(path); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read after Close: %v", err)
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
