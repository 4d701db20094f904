package synth

import (
	"context"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/perfdata"
)

// A method opened for the whole host, executable mappings only, dumps
// what rescope sets next: one process, with its data mappings, then
// without them again. synth inject loads its method before perf's
// header says which.
func TestRescope(t *testing.T) {
	self := os.Getpid()
	for _, name := range []MethodName{MethodBPF, MethodProcmaps, MethodProcquery} {
		t.Run(name.String(), func(t *testing.T) {
			o := Options{NoBuildID: true, NoLive: true}
			d, err := resolve(&o)
			if err != nil {
				t.Fatal(err)
			}
			m, err := openResolved(name, MethodOptions{Options: o}, d)
			if errors.Is(err, ErrNoProcquery) || name == MethodBPF && err != nil {
				t.Skipf("%s: %v", name, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, data := range []bool{true, false} {
				d := config.Resolved{Options: Options{NoBuildID: true, NoLive: true, Data: data}, Pids: []int{self}}
				if err := m.rescope(d); err != nil {
					t.Fatal(err)
				}
				procs, nonExec := map[uint32]bool{}, 0
				_, err := m.Dump(context.Background(), func(rec []byte) error {
					if perfdata.RecordView(rec).Type() != perfdata.RecordMmap2 {
						return nil
					}
					mm, _, err := perfdata.ParseMmap2(rec, DefaultSampleType)
					if err != nil {
						return err
					}
					procs[mm.Pid] = true
					if mm.Prot&unix.PROT_EXEC == 0 {
						nonExec++
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(procs) != 1 || !procs[uint32(self)] {
					t.Errorf("data %v: mappings of %v, want of pid %d only", data, procs, self)
				}
				if data != (nonExec > 0) {
					t.Errorf("data %v: %d non-executable mappings", data, nonExec)
				}
			}
		})
	}
}
