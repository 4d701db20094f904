package synth_test

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// A thread's id names its process; an id of no task is an error naming it.
func TestProcesses(t *testing.T) {
	self := os.Getpid()
	thread := testenv.Thread(t)
	got, err := synth.Processes([]int{thread, self, 1})
	if want := []int{1, self}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Processes(thread %d, %d, 1) = %v, %v; want %v", thread, self, got, err, want)
	}
	gone := testenv.UnusedPid(t)
	_, err = synth.Processes([]int{self, gone})
	if !errors.Is(err, synth.ErrNoProcess) || !strings.Contains(err.Error(), strconv.Itoa(gone)) {
		t.Errorf("Processes(%d) = %v; want ErrNoProcess naming it", gone, err)
	}
}
