package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/synth-dev/synth/synth"
)

// targetFlags are perf record's target options (see addCommon).
type targetFlags struct {
	pids, tids, uid, cgroup string
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
