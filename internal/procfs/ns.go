package procfs

import (
	"fmt"
	"os"
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

// initUserNSIno is the inode of the initial user namespace's file
// (PROC_USER_INIT_INO, include/linux/proc_ns.h): fixed since Linux 3.8.
const initUserNSIno = 0xEFFFFFFD

// InInitialUserNS reports whether this process runs in the initial user
// namespace, where its capabilities are the ones BPF and system-wide
// perf events check (a user namespace's hold only inside it).
func InInitialUserNS() (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &st); err != nil {
		return false, fmt.Errorf("user namespace: %w", err)
	}
	return st.Ino == initUserNSIno, nil
}

// CheckPidNS returns an error if the /proc mounted here is not of this
// process's pid namespace: it numbers the processes as another
// namespace does, and every pid read from it or looked up in it (targets,
// build IDs through map_files, COMMs) would be another's. A container
// with its own pid namespace must mount its own /proc (what
// `unshare --pid --fork --mount-proc` and container runtimes do).
func CheckPidNS() error {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return fmt.Errorf("read /proc/self: %w", err)
	}
	if pid := os.Getpid(); self != strconv.Itoa(pid) {
		return fmt.Errorf("the /proc mounted here is another pid namespace's (/proc/self is %s, this process is %d): mount this namespace's own /proc (as unshare --mount-proc does)", self, pid)
	}
	return nil
}
