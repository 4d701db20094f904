package procfs

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMaps(t *testing.T) {
	f, err := os.Open("testdata/maps.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	maps, err := ParseMaps(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{0x55d0a0e00000, 0x55d0a0e2b000, 1, false, 0, 0xfe, 0, 247766, "/usr/bin/bash"},
		{0x55d0a0e2b000, 0x55d0a0f1a000, 5, false, 0x2b000, 0xfe, 0, 247766, "/usr/bin/bash"},
		{0x55d0a1c4c000, 0x55d0a1dc6000, 3, false, 0, 0, 0, 0, "[heap]"},
		{0x7f1c00000000, 0x7f1c00021000, 3, false, 0, 0, 0, 0, ""},
		{0x7f1c00021000, 0x7f1c04000000, 0, false, 0, 0, 0, 0, ""},
		{0x7f1c08000000, 0x7f1c08001000, 5, true, 0, 0, 1, 1035, "/memfd:synth-test (deleted)"},
		{0x7f1c08001000, 0x7f1c08002000, 5, false, 0x1000, 8, 1, 12, "/tmp/dir with spaces/lib with spaces.so"},
		{0x7f1c08002000, 0x7f1c08003000, 5, false, 0, 8, 1, 13, "/tmp/gone.so (deleted)"},
		{0x7ffd3a1e4000, 0x7ffd3a205000, 3, false, 0, 0, 0, 0, "[stack]"},
		{0x7ffd3a3a2000, 0x7ffd3a3a6000, 1, false, 0, 0, 0, 0, "[vvar]"},
		{0x7ffd3a3a6000, 0x7ffd3a3a8000, 5, false, 0, 0, 0, 0, "[vdso]"},
		{0xffffffffff600000, 0xffffffffff601000, 4, false, 0, 0, 0, 0, "[vsyscall]"},
	}
	if len(maps) != len(want) {
		t.Fatalf("%d mappings, want %d", len(maps), len(want))
	}
	for i := range want {
		if maps[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i+1, maps[i], want[i])
		}
	}
	if maps[5].Flags() != 1 || maps[0].Flags() != 2 {
		t.Error("Flags: want MAP_SHARED for 's', MAP_PRIVATE for 'p'")
	}
}

// malformedMaps are maps texts both parsers reject.
var malformedMaps = []string{
	"zz-10 r-xp 0 00:00 0\n",
	"10-20 r-x 0 00:00 0\n",
	"10-20 r-xp 0 0000 0\n",
	"10-20 r-xp 0 00:00\n",
	"10-20 r-xp 0 00:00 x /a\n",
	"10-20 r-xp 0 00:00 1 /" + strings.Repeat("a", 5000) + "\n",
}

func TestParseMapsErrors(t *testing.T) {
	for _, in := range malformedMaps {
		if _, err := ParseMaps(strings.NewReader(in)); err == nil {
			t.Errorf("ParseMaps(%.40q) = nil error", in)
		}
	}
}

func TestReadMapsSelf(t *testing.T) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := ParseMaps(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); len(maps) != n || n == 0 {
		t.Errorf("%d mappings from %d lines", len(maps), n)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, m := range maps {
		found = found || (m.Path == exe && m.Prot&4 != 0)
	}
	if !found {
		t.Errorf("no executable mapping of %s", exe)
	}
}

func TestGone(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMaps(cmd.Process.Pid); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("maps of an exited process: %v, want ErrNotExist", err)
	}
	if _, err := ReadComms(cmd.Process.Pid); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("comms of an exited process: %v, want ErrNotExist", err)
	}
}

func TestPidsAndComms(t *testing.T) {
	pids, err := Pids()
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	var found bool
	for i, p := range pids {
		found = found || p == self
		if i > 0 && pids[i-1] >= p {
			t.Fatalf("pids not ascending at %d", i)
		}
	}
	if !found {
		t.Errorf("own pid %d not in %v", self, pids)
	}
	comms, err := ReadComms(self)
	if err != nil {
		t.Fatal(err)
	}
	if c := comms[self]; c == "" || len(c) > 15 {
		t.Errorf("own comm %q", c)
	}
}

func FuzzParseMaps(f *testing.F) {
	b, _ := os.ReadFile("testdata/maps.txt")
	f.Add(b)
	f.Add([]byte("10-20 r-xp 0 00:00 0 \n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		maps, err := ParseMaps(bytes.NewReader(in))
		if err == nil && len(maps) > bytes.Count(in, []byte("\n"))+1 {
			t.Fatalf("%d mappings from %d lines", len(maps), bytes.Count(in, []byte("\n"))+1)
		}
	})
}

func TestParseMountTypes(t *testing.T) {
	const text = `22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 master:2 - ext4 /dev/vda rw
44 27 0:41 / /mnt/a\040b rw,nosuid,nodev,relatime shared:7 - fuse.sshfs host:/x rw,user_id=0
`
	got, err := ParseMountTypes(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Dev]string{{0, 21}: "proc", {254, 0}: "ext4", {0, 41}: "fuse.sshfs"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"1 2 0:1 / / rw proc proc rw\n", "1 2 x / / rw - proc proc rw\n", "1 2 0:1 / / rw -\n"} {
		if _, err := ParseMountTypes(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	self, err := ReadMountTypes(0)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self", &st); err != nil {
		t.Fatal(err)
	}
	if typ := self[Dev{unix.Major(st.Dev), unix.Minor(st.Dev)}]; typ != "proc" {
		t.Errorf("/proc is on %q", typ)
	}
}

// A running thread has no SIGKILL pending; a task that is gone counts
// as killed. (A thread of a dying process that has not yet taken its
// SIGKILL is synth's TestTableDropsDyingProcess.)
func TestKilled(t *testing.T) {
	if Killed(os.Getpid()) {
		t.Errorf("Killed(%d), this test's own process, = true", os.Getpid())
	}
	c := exec.Command("/bin/sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid := c.Process.Pid
	if Killed(pid) {
		t.Errorf("Killed(%d), a sleep, = true", pid)
	}
	c.Process.Kill()
	c.Wait()
	if !Killed(pid) {
		t.Errorf("Killed(%d), reaped, = false", pid)
	}
}
