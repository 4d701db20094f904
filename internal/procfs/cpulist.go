package procfs

import (
	"fmt"
	"strconv"
	"strings"
)

// maxListed bounds the numbers one range of a list may expand to, so
// that a list read from a file cannot make a huge allocation.
const maxListed = 1 << 16

// CPUList parses a kernel CPU or node list such as "0-3,5"
// (Documentation/admin-guide/cputopology.rst), as sysfs writes them.
func CPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: bad cpu %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a >= maxListed {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
