package buildid

import (
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/procfs"
)

// localFS are the filesystems whose reads this process does itself:
// disk and memory filesystems, whose reads end. A file anywhere else
// (FUSE, NFS, CIFS, 9p, Ceph, virtiofs...), or on a device no mount
// table shows (a lazily unmounted FUSE mount), is read in the helper
// process of mapread, which a read that never ends cannot keep from
// exiting. An overlay is taken to be on local layers.
var localFS = map[string]bool{
	"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true, "f2fs": true,
	"jfs": true, "reiserfs": true, "nilfs2": true, "bcachefs": true, "zfs": true,
	"tmpfs": true, "ramfs": true, "hugetlbfs": true, "devtmpfs": true, "overlay": true,
	"squashfs": true, "erofs": true, "cramfs": true, "romfs": true, "iso9660": true, "udf": true,
	"vfat": true, "msdos": true, "exfat": true, "ntfs": true, "ntfs3": true, "hfs": true, "hfsplus": true,
}

// mounts says which devices hold local filesystems. It reads this
// process's mount table once per dump, when first asked, and the table
// of the process that maps a file on a device it does not show (another
// mount namespace). Safe for concurrent use.
type mounts struct {
	mu    sync.Mutex
	types map[procfs.Dev]string // nil: not read this dump
	seen  map[int]bool          // processes whose tables were read this dump
	// points are where this process's mount table mounts each device;
	// nil: not read this dump.
	points map[procfs.Dev][]string
}

// shmDev is the device of the kernel's internal shmem mount, which holds
// memfd files and shared anonymous memory and is in no mount table.
var shmDev = sync.OnceValue(func() procfs.Dev {
	fd, err := unix.MemfdCreate("synth-shm-dev", unix.MFD_CLOEXEC)
	if err != nil {
		return procfs.Dev{Maj: ^uint32(0)}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return procfs.Dev{Maj: ^uint32(0)}
	}
	return procfs.Dev{Maj: unix.Major(st.Dev), Min: unix.Minor(st.Dev)}
})

// reset makes the next question read the mount tables again.
func (m *mounts) reset() {
	m.mu.Lock()
	m.types, m.seen, m.points = nil, nil, nil
	m.mu.Unlock()
}

// local reports whether the files on dev, mapped by process pid, are on
// a local filesystem.
func (m *mounts) local(dev procfs.Dev, pid int) bool {
	if dev == shmDev() {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.types == nil {
		m.types, m.seen = make(map[procfs.Dev]string), make(map[int]bool)
		m.merge(0)
	}
	typ, ok := m.types[dev]
	if !ok && !m.seen[pid] {
		m.seen[pid] = true
		m.merge(pid)
		typ = m.types[dev]
	}
	return localFS[typ]
}

// merge adds the mount table of pid (0: this process). Device numbers
// are the host's, whatever the namespace. A table that cannot be read
// adds nothing: its files are read in the helper.
func (m *mounts) merge(pid int) {
	types, err := procfs.ReadMountTypes(pid)
	if err != nil {
		return
	}
	for dev, typ := range types {
		m.types[dev] = typ
	}
}

// openPath opens path as this process's mount namespace resolves it,
// with flags, without leaving the mount of dev whose mount point is the
// longest prefix of path: never into another mount (a FUSE mount there
// would block the open for ever), never through a symbolic link (a
// record's name is resolved already). dev must be local.
func (m *mounts) openPath(path string, dev procfs.Dev, flags uint64) (int, error) {
	mp, ok := m.pointOf(path, dev)
	if !ok {
		return -1, unix.EXDEV
	}
	dir, err := unix.Open(mp, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dir)
	rel := strings.TrimLeft(strings.TrimPrefix(path, mp), "/")
	if rel == "" {
		return -1, unix.EISDIR
	}
	return unix.Openat2(dir, rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
}

// pointOf returns the longest mount point of dev, in this process's
// mount table, under which path lies.
func (m *mounts) pointOf(path string, dev procfs.Dev) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.points == nil {
		if m.points, _ = procfs.ReadMountPoints(); m.points == nil {
			m.points = make(map[procfs.Dev][]string)
		}
	}
	best, found := "", false
	for _, p := range m.points[dev] {
		under := p == "/" || path == p || strings.HasPrefix(path, p+"/")
		if under && strings.HasPrefix(path, "/") && (!found || len(p) > len(best)) {
			best, found = p, true
		}
	}
	return best, found
}

// LocalFS reports whether typ, a filesystem type of the mount table,
// is one whose reads end: a file anywhere else may block a read, or an
// open, for ever.
func LocalFS(typ string) bool { return localFS[typ] }
