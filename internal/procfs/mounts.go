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
	err := parseMountinfo(r, func(dev Dev, f []string, sep int) { types[dev] = f[sep+1] })
	if err != nil {
		return nil, err
	}
	return types, nil
}

// ParseMountPoints reads /proc/PID/mountinfo text and returns the
// points where each device is mounted, as the reading process's root
// sees them.
func ParseMountPoints(r io.Reader) (map[Dev][]string, error) {
	points := make(map[Dev][]string)
	err := parseMountinfo(r, func(dev Dev, f []string, _ int) {
		points[dev] = append(points[dev], unescapeMount(f[4]))
	})
	if err != nil {
		return nil, err
	}
	return points, nil
}

// parseMountinfo calls fn with each line's device, fields and the index
// of its "-" separator.
func parseMountinfo(r io.Reader, fn func(dev Dev, f []string, sep int)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		f, sep := mountinfoFields(sc.Text())
		if len(f) < 5 || sep < 0 || sep+1 >= len(f) {
			return fmt.Errorf("mountinfo line %d: no filesystem type", n)
		}
		maj, min, ok := strings.Cut(f[2], ":")
		ma, err1 := strconv.ParseUint(maj, 10, 32)
		mi, err2 := strconv.ParseUint(min, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("mountinfo line %d: bad device %q", n, f[2])
		}
		fn(Dev{uint32(ma), uint32(mi)}, f, sep)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read mountinfo: %w", err)
	}
	return nil
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

// ReadMountPoints reads this process's mount table, as
// ParseMountPoints.
func ReadMountPoints() (map[Dev][]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	return ParseMountPoints(f)
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
