package synth_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// A process that exits during a dump, after the dump read it, leaves a
// Table at its EXIT, whichever point of the dump the exit falls at and
// whenever its EXIT is read: at once, or only after the next dump, which
// did not read it (issue 56). The EXIT is after the read of the process
// that the dump wrote, and no dump read a process of its pid after it,
// so it is not Superseded. The hook kills the process at its point of
// the dump, after the dump read it, and waits until it is a zombie, so
// the kernel has written its EXIT when the dump goes on; "ended" kills
// it after the dump's end, before its live records are read.
func TestTableExitAfterRead(t *testing.T) {
	eachWalk(t, tableExitAfterRead)
}

func tableExitAfterRead(t *testing.T, walk synth.Walk) {
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Walk: walk}, Unmaps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	points := []struct {
		name string
		at   synth.HookPoint
		hook bool
	}{
		{"read", synth.HookRead, true},
		{"passed", synth.HookPassed, true},
		{"walked", synth.HookWalked, true},
		{"ended", 0, false},
	}
	for _, p := range points {
		for _, nextDump := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/next-dump-first=%v", p.name, nextDump), func(t *testing.T) {
				exitAfterRead(t, s, p.at, p.hook, nextDump)
			})
		}
	}
}

// exitAfterRead starts a process, has a dump read it and the process exit
// at point at of the dump (or after its end, without hook), then reads
// the stream: its live records at once, or, with nextDump, after another
// dump.
func exitAfterRead(t *testing.T, s *synth.Session, at synth.HookPoint, hook, nextDump bool) {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	reaped := false
	reap := func() {
		if !reaped {
			reaped = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	defer reap()
	tb := synth.NewTable()
	dumpInto(t, s, tb, nil)
	if _, ok := tb.Process(pid); !ok {
		t.Fatalf("the first dump did not read pid %d", pid)
	}

	ran := false
	kill := func() {
		ran = true
		if err := unix.Kill(int(pid), unix.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Until it is a zombie: the kernel has written its EXIT.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if exited, _ := procExited(pid); exited {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d: no zombie 10 s after SIGKILL", pid)
			}
		}
	}
	if hook {
		s.SetExitHook(pid, at, kill)
		defer s.SetExitHook(0, 0, nil)
	}
	var exit *synth.Record
	var readAt uint64 // by the last dump when the EXIT came; 0: none
	apply := func(rec *synth.Record) {
		v := perfdata.RecordView(rec.Raw)
		if rec.Kind == synth.KindLive && rec.Type() == perfdata.RecordExit && v.Pid() == pid && v.Tid() == pid {
			r := *rec
			exit = &r
			readAt, _ = s.ReadAt(pid)
		}
		if err := tb.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	dumpUntilEnd(t, s, apply)
	s.SetExitHook(0, 0, nil)
	if hook && !ran {
		t.Fatal("the hook did not run")
	}
	if at, ok := s.ReadAt(pid); !ok || ran && at == 0 {
		t.Fatalf("the dump did not read pid %d before it exited", pid)
	}
	if !hook {
		kill()
	}
	if nextDump {
		dumpUntilEnd(t, s, apply)
	}
	flushApply(t, s, apply)
	switch {
	case exit == nil:
		t.Errorf("no EXIT of pid %d in the stream", pid)
	case exit.Superseded:
		t.Errorf("the EXIT of pid %d (gen %d, time %d) is Superseded; the last dump read pid %d at %d (0: not at all)", pid, exit.Gen, exit.Time, pid, readAt)
	}
	if p, ok := tb.Process(pid); ok {
		t.Errorf("the table holds pid %d %q, a zombie, after its EXIT", pid, p.Comm)
	}
	reap()
	flushApply(t, s, apply)
	if _, ok := tb.Process(pid); ok {
		t.Errorf("the table holds pid %d after it was reaped", pid)
	}
}

// dumpUntilEnd runs a dump and applies its records up to its end, and
// no live record after: those wait in the stream.
func dumpUntilEnd(t *testing.T, s *synth.Session, apply func(*synth.Record)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Dump(ctx); err != nil {
		t.Fatal(err)
	}
	var rec synth.Record
	for rec.Kind != synth.KindDumpEnd {
		if err := s.ReadContext(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		apply(&rec)
	}
}
