package testproc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// CPUTicks is the CPU time process pid and its threads have used, in
// clock ticks (utime and stime of /proc/PID/stat); 0 once it is gone.
// Tests wait on it, not on the clock, for a process to have run: on a
// loaded host a second of the clock may be a few ticks of its CPU.
func CPUTicks(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return 0
	}
	// After the comm: state (field 3) ... utime (14), stime (15).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}
