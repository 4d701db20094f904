package synth_test

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/synth"
)

// A thread's id names its process; an id of no task is an error naming it.
func TestProcesses(t *testing.T) {
	self := os.Getpid()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	thread := 0
	for _, e := range ents {
		if tid, _ := strconv.Atoi(e.Name()); tid != self {
			thread = tid
		}
	}
	if thread == 0 {
		t.Fatal("the test process has no thread but its leader")
	}
	got, err := synth.Processes([]int{thread, self, 1})
	if want := []int{1, self}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Processes(thread %d, %d, 1) = %v, %v; want %v", thread, self, got, err, want)
	}
	gone := 4194303 // the largest pid_max: taken only on a very busy host
	for ; gone > 1; gone-- {
		if _, err := os.Stat("/proc/" + strconv.Itoa(gone)); err != nil {
			break
		}
	}
	_, err = synth.Processes([]int{self, gone})
	if !errors.Is(err, synth.ErrNoProcess) || !strings.Contains(err.Error(), strconv.Itoa(gone)) {
		t.Errorf("Processes(%d) = %v; want ErrNoProcess naming it", gone, err)
	}
}
