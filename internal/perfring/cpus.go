package perfring

import (
	"fmt"
	"os"
	"strings"

	"github.com/synth-dev/synth/internal/procfs"
)

// OnlineCPUs returns the CPUs a system-wide event must be opened on,
// from /sys/devices/system/cpu/online.
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("online cpus: %w", err)
	}
	return procfs.CPUList(strings.TrimSpace(string(b)))
}
