package procfs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Dev is a device number as /proc shows it: major and minor.
type Dev struct{ Maj, Min uint32 }

// ParseMountTypes reads /proc/PID/mountinfo text
// (fs/proc_namespace.c show_mountinfo) and returns the filesystem type
// of each mounted device: "ext4", "tmpfs", "fuse.sshfs"...
func ParseMountTypes(r io.Reader) (map[Dev]string, error) {
	types := make(map[Dev]string)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		f, sep := mountinfoFields(sc.Text())
		if len(f) < 3 || sep < 0 || sep+1 >= len(f) {
			return nil, fmt.Errorf("mountinfo line %d: no filesystem type", n)
		}
		maj, min, ok := strings.Cut(f[2], ":")
		ma, err1 := strconv.ParseUint(maj, 10, 32)
		mi, err2 := strconv.ParseUint(min, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo line %d: bad device %q", n, f[2])
		}
		types[Dev{uint32(ma), uint32(mi)}] = f[sep+1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return types, nil
}

// mountinfoFields splits a mountinfo line, "ID PARENT MAJ:MIN ROOT
// MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER", and returns the
// index of the "-" separator, or -1.
func mountinfoFields(line string) ([]string, int) {
	f := strings.Fields(line)
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			return f, i
		}
	}
	return f, -1
}

// ReadMountTypes reads the mount table of process pid (0: this
// process), as ParseMountTypes.
func ReadMountTypes(pid int) (map[Dev]string, error) {
	path := "/proc/self/mountinfo"
	if pid > 0 {
		path = fmt.Sprintf("/proc/%d/mountinfo", pid)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	types, err := ParseMountTypes(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return types, nil
}
