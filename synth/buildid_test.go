package synth_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/synth-dev/synth/internal/procfs"
)

// fileKey names a file for the build-ID oracle's cache.
type fileKey struct {
	maj, min uint32
	ino      uint64
}

var (
	oracleMu    sync.Mutex
	oracleCache = map[fileKey][]byte{}
)

// fileBuildID is the test's oracle: the GNU build ID of the file behind
// mapping m of process pid, read with debug/elf through
// /proc/PID/map_files (independent of the code under test), or nil.
func fileBuildID(pid int, m procfs.Mapping) []byte {
	if m.Ino == 0 {
		return nil
	}
	k := fileKey{m.Maj, m.Min, m.Ino}
	oracleMu.Lock()
	defer oracleMu.Unlock()
	if id, ok := oracleCache[k]; ok {
		return id
	}
	id := elfBuildID(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End))
	oracleCache[k] = id
	return id
}

func elfBuildID(path string) []byte {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > 1<<16 {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			continue
		}
		for len(b) >= 12 {
			nn, dn, typ := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
			name := 12 + (nn+3)&^3
			end := name + (dn+3)&^3
			if uint64(end) > uint64(len(b)) {
				break
			}
			if typ == 3 && bytes.Equal(b[12:12+nn], []byte("GNU\x00")) && dn > 0 && dn <= 20 {
				return b[name : name+dn]
			}
			b = b[end:]
		}
	}
	return nil
}

// readelfBuildID asks binutils' readelf -n, a second oracle.
func readelfBuildID(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("readelf", "-n", path).Output()
	if err != nil {
		t.Fatalf("readelf -n %s: %v", path, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "Build ID: "); ok {
			return id
		}
	}
	return ""
}

var _ = os.Getpid
