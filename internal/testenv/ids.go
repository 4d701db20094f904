package testenv

import (
	"os"
	"strconv"
	"testing"
)

// Thread returns the id of a thread of this process other than its
// leader: a Go test binary always runs several.
func Thread(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	for _, e := range ents {
		if tid, _ := strconv.Atoi(e.Name()); tid != 0 && tid != self {
			return tid
		}
	}
	t.Fatal("the test process has no thread but its leader")
	return 0
}

// UnusedPid returns an id that names no task, from the top of the
// largest pid_max down: one is free on any host but a very busy one.
func UnusedPid(t testing.TB) int {
	t.Helper()
	for pid := 4194303; pid > 1; pid-- {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
			return pid
		}
	}
	t.Fatal("every pid is taken")
	return 0
}
