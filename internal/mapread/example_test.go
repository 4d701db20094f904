package mapread_test

import (
	"fmt"
	"os"

	"github.com/synth-dev/synth/internal/mapread"
)

// Read the build ID of the file mapped at [start, end) in process pid,
// in the helper process, and check it is still the file that was meant.
func ExampleHelper_Read() {
	var h mapread.Helper
	defer h.Close()
	pid, start, end := os.Getpid(), uint64(0x400000), uint64(0x401000)
	res, err := h.Read(mapread.Path(pid, start, end))
	switch {
	case err != nil:
		fmt.Println("helper:", err)
	case !res.Opened || !res.Read:
		fmt.Println("not read")
	case res.Before != res.After:
		fmt.Println("changed while read")
	default:
		fmt.Printf("build ID %x\n", res.ID)
	}
}
