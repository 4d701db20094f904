package bpfmethod

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/synth-dev/synth/internal/procfs"
	"golang.org/x/sys/unix"
)

// PermissionError reports that the process lacks a privilege a method
// needs: CAP_BPF and CAP_PERFMON for the BPF method, CAP_PERFMON (or a
// low perf_event_paranoid) for sampling. errors.Is(err, os.ErrPermission)
// holds for it. It is synth.PermissionError.
type PermissionError struct {
	Op      string   // what was refused
	Missing []string // the capabilities missing, where known
	Err     error    // the kernel's refusal
}

func (e *PermissionError) Error() string {
	if len(e.Missing) > 0 {
		return fmt.Sprintf("%s: missing %s (run as root or grant them)",
			e.Op, strings.Join(e.Missing, " and "))
	}
	return fmt.Sprintf("%s: %v", e.Op, e.Err)
}

func (e *PermissionError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, os.ErrPermission) true for every PermissionError.
func (e *PermissionError) Is(target error) bool { return target == os.ErrPermission }

// errUserNS is why a process in a user namespace cannot load BPF, as
// root as it may be there.
var errUserNS = errors.New("this process runs in a user namespace, whose capabilities hold only inside it: " +
	"BPF and system-wide perf events need CAP_BPF and CAP_PERFMON in the initial user namespace")

// Capabilities the BPF method needs (include/uapi/linux/capability.h):
// CAP_BPF to load the programs, CAP_PERFMON for system-wide perf events,
// bpf_d_path and reading kernel memory. CAP_SYS_ADMIN implies both.
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// checkCaps returns a *PermissionError naming the capabilities the
// process's effective set lacks.
func checkCaps() error {
	if initial, err := procfs.InInitialUserNS(); err == nil && !initial {
		return &PermissionError{Op: "bpf method", Err: errUserNS}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	eff := uint64(data[1].Effective)<<32 | uint64(data[0].Effective)
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if has(capSysAdmin) {
		return nil
	}
	var missing []string
	if !has(capBPF) {
		missing = append(missing, "CAP_BPF")
	}
	if !has(capPerfmon) {
		missing = append(missing, "CAP_PERFMON")
	}
	if len(missing) == 0 {
		return nil
	}
	return &PermissionError{
		Op:      "bpf method",
		Missing: missing,
		Err:     errors.New("missing " + strings.Join(missing, ", ")),
	}
}
