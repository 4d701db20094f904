package procfs

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNoCgroupFS reports a host with neither a cgroup v1 hierarchy that
// has the perf_event controller nor a cgroup2 mount.
var ErrNoCgroupFS = errors.New("no perf_event or cgroup2 hierarchy mounted")

// CgroupFS is the cgroup hierarchy perf names cgroups in: a cgroup v1
// hierarchy with the perf_event controller if one is mounted, else the
// cgroup2 one (tools/lib/api/fs/cgroup.c, cgroupfs_find_mountpoint).
type CgroupFS struct {
	Mount string // the mount point
	V1    bool
}

// FindCgroupFS finds the hierarchy in this process's mount table.
func FindCgroupFS() (CgroupFS, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return CgroupFS{}, fmt.Errorf("find cgroup mount: %w", err)
	}
	defer f.Close()
	c, err := parseCgroupFS(f)
	if err != nil {
		return CgroupFS{}, fmt.Errorf("find cgroup mount: %w", err)
	}
	return c, nil
}

func parseCgroupFS(r io.Reader) (CgroupFS, error) {
	var v2 string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		f, sep := mountinfoFields(sc.Text())
		if sep < 0 || sep+3 >= len(f) {
			continue
		}
		switch f[sep+1] {
		case "cgroup":
			for _, o := range strings.Split(f[sep+3], ",") {
				if o == "perf_event" {
					return CgroupFS{Mount: unescapeMount(f[4]), V1: true}, nil
				}
			}
		case "cgroup2":
			if v2 == "" {
				v2 = unescapeMount(f[4])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return CgroupFS{}, err
	}
	if v2 == "" {
		return CgroupFS{}, ErrNoCgroupFS
	}
	return CgroupFS{Mount: v2}, nil
}

// unescapeMount undoes the octal escapes of mountinfo's paths (\040).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// CgroupID returns the id of the cgroup at dir: the kernfs node id that
// name_to_handle_at(2) returns as its handle, and that perf's CGROUP
// records and samples carry.
func CgroupID(dir string) (uint64, error) {
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, dir, 0)
	if err != nil {
		return 0, fmt.Errorf("cgroup id of %s: %w", dir, err)
	}
	if b := h.Bytes(); len(b) >= 8 {
		return binary.NativeEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("cgroup id of %s: handle of %d bytes", dir, h.Size())
}

// maxCgroupDepth bounds the walk of a hierarchy.
const maxCgroupDepth = 64

// Walk calls fn for the hierarchy's root and every cgroup below it,
// parents first and each directory's entries in readdir order, as perf
// --all-cgroups walks them, with the cgroup's id and its path relative to
// the mount ("/" for the root). A cgroup removed during the walk is
// left out.
func (c CgroupFS) Walk(fn func(id uint64, path string) error) error {
	return c.walk("/", 0, fn)
}

func (c CgroupFS) walk(rel string, depth int, fn func(uint64, string) error) error {
	dir := c.Mount + rel
	id, err := CgroupID(dir)
	if errors.Is(err, fs.ErrNotExist) && rel != "/" {
		return nil
	}
	if err != nil {
		return err
	}
	if err := fn(id, rel); err != nil {
		return err
	}
	if depth >= maxCgroupDepth {
		return nil
	}
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) && rel != "/" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("walk cgroups: %w", err)
	}
	ents, err := f.ReadDir(-1) // directory order, as readdir(3)
	f.Close()
	if err != nil {
		return fmt.Errorf("walk cgroups: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := rel + e.Name()
		if rel != "/" {
			sub = rel + "/" + e.Name()
		}
		if err := c.walk(sub, depth+1, fn); err != nil {
			return err
		}
	}
	return nil
}

// ProcessCgroup returns the cgroup of process pid in the hierarchy, a
// path relative to its mount, from /proc/PID/cgroup.
func (c CgroupFS) ProcessCgroup(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if errors.Is(err, errESRCH) {
		err = fs.ErrNotExist
	}
	if err != nil {
		return "", fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// HIERARCHY-ID:CONTROLLERS:PATH
		id, rest, ok1 := strings.Cut(line, ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			continue
		}
		if !c.V1 && id == "0" && ctrls == "" {
			return path, nil
		}
		if c.V1 && id != "0" {
			for _, ct := range strings.Split(ctrls, ",") {
				if ct == "perf_event" {
					return path, nil
				}
			}
		}
	}
	return "", fmt.Errorf("cgroup of pid %d: not in %s", pid, c.Mount)
}
