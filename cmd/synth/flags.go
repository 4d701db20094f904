package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synth-dev/synth/synth"
)

// A command line is read with perf's option grammar (tools/lib/subcmd's
// parse-options), which perf users type from habit: short options
// bundled (-ag) or with the value attached (-F99, -p1234, -o-), long
// ones as --freq=99 or --freq 99, --no-X to turn a boolean off, and the
// options ending at the first argument that is not one (synth record ls
// -l runs ls -l) or at --.

// cmdLine is a command's options and how it prints them.
type cmdLine struct {
	name     string // the command: dump, record...
	synopsis string // what follows "usage: synth NAME "
	fs       *pflag.FlagSet
	// perf holds the options of perf's own command that synth does
	// not have, so that a perf user is told so, not "unknown option".
	perf []perfOption
}

// newCmdLine starts a command's options.
func newCmdLine(name, synopsis string) *cmdLine {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.SortFlags = false
	fs.SetOutput(io.Discard) // errors are printed by parse, in one line
	fs.Usage = func() {}
	return &cmdLine{name: name, synopsis: synopsis, fs: fs}
}

// alias defines name as another name of the option canonical, left out
// of the help (the option's text names it).
func (c *cmdLine) alias(name, canonical string) {
	f := c.fs.Lookup(canonical)
	c.fs.AddFlag(&pflag.Flag{Name: name, Value: f.Value, NoOptDefVal: f.NoOptDefVal, Usage: f.Usage, Hidden: true})
}

// negValue sets the boolean it wraps to the opposite of what it is set.
type negValue struct{ pflag.Value }

func (v negValue) Set(s string) error {
	switch s {
	case "true":
		return v.Value.Set("false")
	case "false":
		return v.Value.Set("true")
	}
	return fmt.Errorf("want true or false, not %q", s)
}

// addNegations gives each boolean option X a --no-X, and each --no-X an
// X, as perf's parse-options does, unless that name is taken.
func (c *cmdLine) addNegations() {
	var neg []*pflag.Flag
	c.fs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() != "bool" || f.Hidden || len(f.Name) == 1 {
			return
		}
		name, ok := strings.CutPrefix(f.Name, "no-")
		if !ok {
			name = "no-" + f.Name
		}
		if c.fs.Lookup(name) == nil {
			neg = append(neg, &pflag.Flag{Name: name, Value: negValue{f.Value}, NoOptDefVal: "true", Hidden: true})
		}
	})
	for _, f := range neg {
		c.fs.AddFlag(f)
	}
}

// parse parses args. On -h it prints the help and returns 0; on a bad
// command line one line naming the option and the help, and exitUsage.
func (c *cmdLine) parse(args []string, stdout, stderr io.Writer) (int, bool) {
	err := c.fs.Parse(args)
	if err == nil {
		return exitOK, true
	}
	if errors.Is(err, pflag.ErrHelp) {
		c.usage(stdout)
		return exitOK, false
	}
	return c.usageError(stderr, "%s", c.explain(err)), false
}

// usageError prints a bad command line's message, with where to look,
// and returns its status.
func (c *cmdLine) usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "synth %s: %s; see 'synth %s -h'\n", c.name, fmt.Sprintf(format, args...), c.name)
	return exitUsage
}

// explain words a parse error as a perf user expects it.
func (c *cmdLine) explain(err error) string {
	var (
		ne *pflag.NotExistError
		ve *pflag.ValueRequiredError
		ie *pflag.InvalidValueError
		se *pflag.InvalidSyntaxError
	)
	switch {
	case errors.As(err, &ne):
		name, short := ne.GetSpecifiedName(), ne.GetSpecifiedShortnames() != ""
		opt := "--" + name
		if short {
			opt = "-" + name
		}
		for _, p := range c.perf {
			if short && p.short == name || !short && p.long != "" && p.long == name {
				return fmt.Sprintf("perf's %s is not supported", p)
			}
		}
		return "unknown option " + opt
	case errors.As(err, &ve):
		return fmt.Sprintf("option %s needs a value", optName(ve.GetFlag()))
	case errors.As(err, &ie):
		return fmt.Sprintf("option %s: bad value %q: %v", optName(ie.GetFlag()), ie.GetValue(), errors.Unwrap(ie))
	case errors.As(err, &se):
		return "bad option " + se.GetSpecifiedFlag()
	}
	return err.Error()
}

// optName names an option as its help does: -p/--pid, or --data.
func optName(f *pflag.Flag) string {
	switch {
	case f.Shorthand == "":
		return "--" + f.Name
	case f.Name == f.Shorthand:
		return "-" + f.Name
	}
	return "-" + f.Shorthand + "/--" + f.Name
}

// usage prints the command's help: each option on one line, with its
// short form and the name of its value, as perf record -h does.
func (c *cmdLine) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: synth %s %s\n\n", c.name, c.synopsis)
	type line struct{ left, text string }
	var lines []line
	width := 0
	c.fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name, text := pflag.UnquoteUsage(f)
		if f.Value.Type() == "count" {
			name = "" // -v, -vv
		}
		var left string
		switch {
		case f.Name == f.Shorthand:
			left = "-" + f.Name
		case f.Shorthand != "":
			left = "-" + f.Shorthand + ", --" + f.Name
		default:
			left = "    --" + f.Name
		}
		if name != "" {
			if f.NoOptDefVal != "" {
				left += "[=<" + name + ">]"
			} else {
				left += " <" + name + ">"
			}
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "[]" && !strings.Contains(text, "default") {
			text += " (default " + d + ")"
		}
		lines = append(lines, line{left, text})
		width = max(width, len(left))
	})
	width = min(width, 32)
	for _, l := range lines {
		if len(l.left) > width {
			fmt.Fprintf(w, "    %s\n    %*s  %s\n", l.left, width, "", l.text)
			continue
		}
		fmt.Fprintf(w, "    %-*s  %s\n", width, l.left, l.text)
	}
}

// The options that commands share are declared once, in groups, each
// with one help text: a group is what its commands have in common, and
// an option read the same way says so the same way in every -h.

// commonFlags are the options dump and record share, as perf record
// has them.
type commonFlags struct {
	out     string
	verbose int
	all     bool
	tf      targetFlags
}

// addCommon declares the shared options, which fill cf and opts; what
// is the command's verb for the target options, outDefault -o's default.
func (c *cmdLine) addCommon(cf *commonFlags, opts *synth.Options, what, outUsage, outDefault string) {
	fs := c.fs
	c.addOutput(&cf.out, outUsage, outDefault)
	fs.BoolVarP(&cf.all, "all-cpus", "a", false, what+" every process (system-wide; the default without a target)")
	fs.StringVarP(&cf.tf.pids, "pid", "p", "", what+" only these processes (`pid[,pid...]`; a thread id means its process)")
	fs.StringVarP(&cf.tf.tids, "tid", "t", "", what+" only these threads (`tid[,tid...]`): their processes' mappings, these threads' records and their leaders'")
	fs.StringVarP(&cf.tf.uid, "uid", "u", "", what+" only the processes of `user` (a name or a number)")
	fs.StringVarP(&cf.tf.cgroup, "cgroup", "G", "", what+" only the processes in cgroup `path` or below it (in the perf_event or cgroup2 hierarchy)")
	fs.BoolVarP(&opts.Data, "data", "d", false, "include non-executable (data) mappings, as perf record -d")
	fs.BoolVar(&opts.Namespaces, "namespaces", false, "add a NAMESPACES record for every task, as perf record --namespaces")
	fs.BoolVar(&opts.Cgroups, "all-cgroups", false, "add a CGROUP record for every cgroup, as perf record --all-cgroups")
	fs.BoolVar(&opts.NoBPFEvent, "no-bpf-event", false, "leave out the BPF_EVENT record of each loaded BPF program (its KSYMBOLs stay)")
	c.addBuildID(&opts.NoBuildID, &opts.BuildIDTimeout)
	fs.Var(&msDuration{&opts.ProcMapTimeout}, "proc-map-timeout",
		fmt.Sprintf("wait at most `ms` (or a duration: 500ms) for a process's mmap lock; a process whose lock is held longer is left out and named (default %v)",
			synth.DefaultProcMapTimeout))
	opts.ProcMapTimeout = synth.DefaultProcMapTimeout
	fs.IntVarP(&opts.RingPages, "mmap-pages", "m", 0,
		fmt.Sprintf("per-CPU ring size in `pages`: a power of two >= %d (default %d; also --ring-pages)", synth.MinRingPages, synth.DefaultRingPages))
	c.alias("ring-pages", "mmap-pages")
	c.addKernelCache(&opts.KernelCache)
	c.addVerbose(&cf.verbose, "say more: where the time went")
}

// addKernelCache declares where the bpf method keeps its programs
// linked against the running kernel: synth.DefaultKernelCache when run
// as root, whose directory it is, else none. --no-btf-cache was its
// name before.
func (c *cmdLine) addKernelCache(dir *string) {
	def := ""
	if os.Geteuid() == 0 {
		def = synth.DefaultKernelCache
	}
	c.fs.StringVar(dir, "kernel-cache", def,
		"keep the bpf method's programs, linked against the running kernel, in `dir`, so that the next run skips the kernel's BTF (default "+synth.DefaultKernelCache+" as root)")
	c.fs.Var(clearValue{dir}, "no-kernel-cache", "link the programs against the kernel's BTF at every run; keep none")
	c.fs.Lookup("no-kernel-cache").NoOptDefVal = "true"
	c.alias("no-btf-cache", "no-kernel-cache")
}

// clearValue is a boolean option that empties the string it wraps.
type clearValue struct{ s *string }

func (v clearValue) Set(s string) error {
	switch s {
	case "true":
		*v.s = ""
	case "false":
	default:
		return fmt.Errorf("want true or false, not %q", s)
	}
	return nil
}
func (v clearValue) String() string { return "false" }
func (v clearValue) Type() string   { return "bool" }

// addOutput declares -o (dump, record, inject).
func (c *cmdLine) addOutput(out *string, usage, def string) {
	c.fs.StringVarP(out, "output", "o", def, usage)
}

// addBuildID declares how the dump identifies files (dump, record,
// inject).
func (c *cmdLine) addBuildID(noBuildID *bool, timeout *time.Duration) {
	c.fs.BoolVarP(noBuildID, "no-buildid", "B", false, "identify files by maj/min/ino instead of build ID")
	c.fs.DurationVar(timeout, "buildid-timeout", synth.DefaultBuildIDTimeout,
		"wait at most `duration` for the build IDs of files new to the cache; a file whose reads block past it (FUSE, NFS) gets none")
}

// addMethod declares how the dump reads the mappings (dump, inject).
func (c *cmdLine) addMethod(method *synth.MethodName, threads *int) {
	c.fs.StringVar((*string)(method), "method", "auto", "how to read the mappings: `method` auto, bpf, procmaps or procquery")
	c.fs.IntVar(threads, "threads", 0, "worker `threads` of the /proc methods (default: one per CPU)")
}

// addBuildIDCache declares perf record's options for the build-ID cache
// filled once the output is written (record, inject).
func (c *cmdLine) addBuildIDCache(skip, all *bool) {
	c.fs.BoolVarP(skip, "no-buildid-cache", "N", false, "do not update the build-ID cache")
	c.fs.BoolVar(all, "buildid-all", false, "put every file with a build ID in the build-ID cache, not only those sampled")
}

// addVerbose declares -v, a count as perf's (-vv): usage says what the
// command adds at -v.
func (c *cmdLine) addVerbose(v *int, usage string) {
	c.fs.CountVarP(v, "verbose", "v", usage)
}

// target reads the target options: a usage error if they do not go
// together.
func (c *commonFlags) target() (synth.Target, error) {
	tg, err := c.tf.target()
	if err == nil && c.all && c.tf.set() {
		err = errors.New("-a covers every process: not with a target (-p, -t, -u, -G)")
	}
	return tg, err
}

// msDuration is perf's --proc-map-timeout: a number of milliseconds, or
// a Go duration.
type msDuration struct{ d *time.Duration }

func (m *msDuration) String() string {
	if m.d == nil {
		return ""
	}
	return m.d.String()
}

func (m *msDuration) Type() string { return "duration" }

func (m *msDuration) Set(s string) error {
	var ms uint64
	if _, err := fmt.Sscanf(s, "%d", &ms); err == nil && fmt.Sprint(ms) == s {
		*m.d = time.Duration(ms) * time.Millisecond
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want milliseconds or a duration (500ms)")
	}
	*m.d = d
	return nil
}

// perfOption is an option of perf's that synth does not have.
type perfOption struct{ short, long string }

func (p perfOption) String() string {
	switch {
	case p.short == "":
		return "--" + p.long
	case p.long == "":
		return "-" + p.short
	}
	return "-" + p.short + "/--" + p.long
}

// perfRecordOptions are perf 6.1's record options (perf record -h) that
// synth record does not have.
var perfRecordOptions = []perfOption{
	{"b", "branch-any"}, {"D", "delay"}, {"I", "intr-regs"}, {"i", "no-inherit"},
	{"j", "branch-filter"}, {"n", "no-samples"}, {"P", "period"}, {"R", "raw-samples"},
	{"r", "realtime"}, {"S", "snapshot"}, {"s", "stat"}, {"T", "timestamp"},
	{"W", "weight"}, {"z", "compression-level"},
	{"", "affinity"}, {"", "aio"}, {"", "all-kernel"}, {"", "all-user"}, {"", "aux-sample"},
	{"", "buildid-mmap"}, {"", "clang-opt"}, {"", "clang-path"}, {"", "code-page-size"},
	{"", "control"}, {"", "data-page-size"}, {"", "debuginfod"}, {"", "dry-run"},
	{"", "exclude-perf"}, {"", "filter"}, {"", "group"}, {"", "kcore"},
	{"", "kernel-callchains"}, {"", "max-size"}, {"", "mmap-flush"}, {"", "no-buffering"},
	{"", "num-thread-synthesize"}, {"", "off-cpu"}, {"", "overwrite"}, {"", "per-thread"},
	{"", "phys-data"}, {"", "running-time"}, {"", "sample-cpu"}, {"", "sample-identifier"},
	{"", "strict-freq"}, {"", "switch-events"}, {"", "switch-output-event"}, {"", "synth"},
	{"", "tail-synthesize"}, {"", "threads"}, {"", "timestamp-boundary"}, {"", "timestamp-filename"},
	{"", "transaction"}, {"", "user-callchains"}, {"", "user-regs"}, {"", "vmlinux"},
	{"", "no-buildid-mmap"},
}

// removeEmpty removes the -o file of a command that failed before it
// wrote anything into it: an empty file is no perf.data, and left behind
// it reads as one that perf cannot open. A file that holds anything is
// left alone.
func removeEmpty(path string) {
	if path == "" || path == "-" {
		return
	}
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() && st.Size() == 0 {
		os.Remove(path)
	}
}
