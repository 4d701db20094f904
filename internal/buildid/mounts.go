package buildid

import (
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
	m.types, m.seen = nil, nil
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
