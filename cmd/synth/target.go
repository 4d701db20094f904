package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/synth-dev/synth/synth"
)

// targetFlags are perf record's target options, each under its short
// and long name.
type targetFlags struct {
	pids, tids, uid, cgroup string
}

func addTargetFlags(fs *flag.FlagSet, what string) *targetFlags {
	t := &targetFlags{}
	for _, name := range []string{"p", "pid"} {
		fs.StringVar(&t.pids, name, "", what+" only these processes (`PID[,PID...]`; a thread id means its process)")
	}
	for _, name := range []string{"t", "tid"} {
		fs.StringVar(&t.tids, name, "", what+" only these threads (`TID[,TID...]`): their processes' mappings, these threads' records")
	}
	for _, name := range []string{"u", "uid"} {
		fs.StringVar(&t.uid, name, "", what+" only the processes of `USER` (a name or a number)")
	}
	for _, name := range []string{"G", "cgroup"} {
		fs.StringVar(&t.cgroup, name, "", what+" only the processes in cgroup `PATH` or below it (in the perf_event or cgroup2 hierarchy)")
	}
	return t
}

// target checks the flags' syntax: a usage error.
func (t *targetFlags) target() (synth.Target, error) {
	var tg synth.Target
	var err error
	if tg.Pids, err = parseIDs(t.pids); err != nil {
		return tg, fmt.Errorf("--pid: %w", err)
	}
	if tg.Tids, err = parseIDs(t.tids); err != nil {
		return tg, fmt.Errorf("--tid: %w", err)
	}
	tg.UID, tg.Cgroup = t.uid, t.cgroup
	if tg.Check() != nil {
		return tg, errors.New("choose one of --pid, --tid, --uid and --cgroup")
	}
	return tg, nil
}

// set reports whether any target flag was given.
func (t *targetFlags) set() bool {
	return t.pids != "" || t.tids != "" || t.uid != "" || t.cgroup != ""
}

// parseIDs reads "ID[,ID...]".
func parseIDs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ids []int
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("bad id %q", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
