package bench

import (
	"fmt"
	"io"
	"os/exec"

	"github.com/synth-dev/synth/cmd/synth/internal/bench/floor"
	"github.com/synth-dev/synth/synth"
)

// floors are the rows floor-maple and floor-iter: each walk's floor
// (package floor), a walk that visits every VMA the way the bpf rows'
// walk does and emits nothing, run in a process of its own as every
// row is, and its summary read as a dump's.
func (c *Config) floors() []method {
	row := func(walk string) method {
		return method{name: "floor-" + walk, cmd: func() *exec.Cmd { return floor.Command(c.Synth, walk) }, parse: parseSynth}
	}
	return []method{row(string(synth.WalkMaple)), row(string(synth.WalkIter))}
}

// Unavailable returns the methods of the bench this kernel cannot run,
// and says why on stderr: procquery without PROCMAP_QUERY (before 6.11),
// the maple walk's floor where the walk cannot prove itself (the bpf
// rows then use the iterator, as auto does).
func Unavailable(stderr io.Writer) []string {
	var skip []string
	if m, err := synth.OpenMethod(synth.MethodProcquery, synth.MethodOptions{Threads: 1}); err != nil {
		skip = append(skip, synth.MethodProcquery.String())
		fmt.Fprintf(stderr, "bench: procquery left out: %v\n", err)
	} else {
		m.Close()
	}
	opts := synth.MethodOptions{Options: synth.Options{NoKernel: true, NoBuildID: true, NoLive: true}}
	if m, err := synth.OpenMethod(synth.MethodBPF, opts); err == nil {
		if walk, why := m.Walk(); walk != synth.WalkMaple {
			skip = append(skip, "floor-maple")
			fmt.Fprintf(stderr, "bench: floor-maple left out, bpf walks with the iterator: %v\n", why)
		}
		m.Close()
	}
	return skip
}
