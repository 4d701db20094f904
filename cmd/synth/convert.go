package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/synth-dev/synth/profconv"
)

// convertArgs is synth convert's command line, perf data convert's
// grammar: -i FILE --to-json OUT becomes --to-pprof and --to-otlp.
type convertArgs struct {
	in, pprof, otlp string
	timeout         time.Duration
	noSymbolize     bool
}

// convertFlags defines synth convert's options, which fill ca.
func convertFlags() (*cmdLine, *convertArgs) {
	cl := newCmdLine("convert", "[options]  (as perf data convert -i FILE --to-json OUT)")
	ca := &convertArgs{}
	cl.fs.StringVarP(&ca.in, "input", "i", "perf.data", "read the perf.data `file`, synth's or perf record's, file or pipe mode ('-': a pipe on stdin)")
	cl.fs.StringVar(&ca.pprof, "to-pprof", "", "write a pprof profile (gzipped protobuf) to `file`")
	cl.fs.StringVar(&ca.otlp, "to-otlp", "", "write an OTLP profiles request (protobuf) to `file`, or POST it to http://HOST:PORT"+profconv.ProfilesPath)
	cl.fs.DurationVar(&ca.timeout, "otlp-timeout", 30*time.Second, "give the OTLP endpoint at most `duration` to answer")
	cl.fs.BoolVar(&ca.noSymbolize, "no-symbolize", false, "open no file: frames stay addresses, with their mappings' build IDs")
	cl.addNegations()
	return cl, ca
}

func runConvert(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cl, ca := convertFlags()
	if code, ok := cl.parse(args, stdout, stderr); !ok {
		return code
	}
	switch {
	case cl.fs.NArg() > 0:
		return cl.usageError(stderr, "unexpected argument %q", cl.fs.Arg(0))
	case ca.pprof == "" && ca.otlp == "":
		return cl.usageError(stderr, "nothing to convert to: give --to-pprof or --to-otlp")
	}
	c, err := profconv.ReadFile(ca.in, profconv.Options{NoSymbolize: ca.noSymbolize})
	if err != nil {
		return fail(stderr, fmt.Errorf("convert %s: %w", ca.in, err))
	}
	if ca.pprof != "" {
		if err := writePprof(ca.pprof, c); err != nil {
			return fail(stderr, err)
		}
	}
	if ca.otlp != "" {
		if err := writeOTLP(ctx, ca.otlp, ca.timeout, c); err != nil {
			return fail(stderr, err)
		}
	}
	printConvertStats(stderr, c.Stats())
	return exitOK
}

func writePprof(path string, c *profconv.Converter) error {
	p, err := c.Profile()
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func writeOTLP(ctx context.Context, to string, timeout time.Duration, c *profconv.Converter) error {
	ps, err := c.OTLP()
	if err != nil {
		return err
	}
	if strings.HasPrefix(to, "http://") || strings.HasPrefix(to, "https://") {
		return profconv.Send(ctx, to, ps, timeout)
	}
	return profconv.WriteOTLP(to, ps)
}

// printConvertStats prints the summary: what was converted, and every
// case that a profile would otherwise leave unsaid.
func printConvertStats(stderr io.Writer, st profconv.Stats) {
	fmt.Fprintf(stderr, "synth: convert: %d samples, %d mappings (%d symbolized, %d without a build ID, %d whose file at hand is not the one recorded); %d frames in no known mapping, %d samples undecodable, %d lost\n",
		st.Samples, st.Mappings, st.Symbolized, st.NoBuildID, st.WrongFile, st.Unmapped, st.BadSamples, st.Lost)
}
