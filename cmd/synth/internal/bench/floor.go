package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/synth"
)

// MethodFloor is the method of `synth dump --method floor`, the rows
// floor-maple and floor-iter: a walk that visits every VMA the way the
// BPF method's walk does and emits nothing, the least a dump with that
// walk can cost. It is not a synth method: it writes no records.
const MethodFloor = bpfmethod.MethodFloor

// Floor loads the floor of walk (synth.WalkMaple, or "", or
// synth.WalkIter), runs it warmup times, then once more, and returns
// that run's stats: the VMAs walked as Mappings.
func Floor(ctx context.Context, walk string, warmup int) (synth.Stats, error) {
	f, err := bpfmethod.NewFloor(walk)
	if err != nil {
		return synth.Stats{}, err
	}
	defer f.Close()
	var st assemble.Stats
	for range warmup + 1 {
		if err = ctx.Err(); err != nil {
			break
		}
		if st, err = f.Dump(ctx, nil); err != nil {
			break
		}
	}
	// What a floor counts: no records, the VMAs walked as Mappings.
	return synth.Stats{Method: st.Method, Mappings: st.Mappings, Elapsed: st.Elapsed,
		ProgramTime: st.ProgramTime}, err
}

// Unavailable returns the methods of the bench this kernel cannot run,
// and says why on stderr: procquery without PROCMAP_QUERY (before 6.11),
// the maple walk's floor where the walk cannot prove itself (the bpf
// rows then use the iterator, as auto does).
func Unavailable(stderr io.Writer) []string {
	var skip []string
	if m, err := synth.OpenMethod(synth.MethodProcquery, synth.MethodOptions{Threads: 1}); err != nil {
		skip = append(skip, synth.MethodProcquery)
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
