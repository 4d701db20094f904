package procfs

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// nsNames are the files of /proc/PID/ns in the order of a NAMESPACES
// record's links (NET_NS_INDEX ... CGROUP_NS_INDEX).
var nsNames = [...]string{"net", "uts", "ipc", "pid", "user", "mnt", "cgroup"}

// NSLink is the device and inode of a namespace file.
type NSLink struct{ Dev, Ino uint64 }

// NSDev returns the device every namespace file has: that of nsfs.
func NSDev() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("namespace device: %w", err)
	}
	return st.Dev, nil
}

// Namespaces returns the namespaces of thread tid of process pid, as
// stat(2) of /proc/PID/task/TID/ns/NAME gives them; a namespace that
// cannot be read (the task exited, or is not ours to inspect) is left
// zero, as perf leaves it.
func Namespaces(pid, tid int) [7]NSLink {
	var links [7]NSLink
	dir := "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/ns/"
	for i, name := range nsNames {
		var st unix.Stat_t
		if err := unix.Stat(dir+name, &st); err == nil {
			links[i] = NSLink{Dev: st.Dev, Ino: st.Ino}
		}
	}
	return links
}

// MountNS returns the inode of process pid's mount namespace, or false
// when it cannot be read (the process exited, or is not ours to inspect).
func MountNS(pid int) (uint64, bool) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/mnt", &st); err != nil {
		return 0, false
	}
	return st.Ino, true
}
