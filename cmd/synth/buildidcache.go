package main

import (
	"fmt"
	"io"
	"os"

	"github.com/synth-dev/synth/internal/buildidcache"
)

// fillBuildIDCache puts the files the perf.data at out has samples in
// (all of its build-ID table with all) into perf's build-ID cache, as
// perf record does at its end, so that perf report finds them once they
// are rebuilt. skip (-N, --no-buildid-cache) leaves the cache alone; so
// does an output that is no file (stdout). Like perf it says nothing,
// unless some files could not be cached.
func fillBuildIDCache(stderr io.Writer, out string, skip, all bool) {
	if skip || out == "" || out == "-" {
		return
	}
	if st, err := os.Stat(out); err != nil || !st.Mode().IsRegular() {
		return
	}
	dir, err := buildidcache.Dir()
	if err != nil {
		fmt.Fprintf(stderr, "synth: warning: %v\n", err)
		return
	}
	es, err := buildidcache.EntriesFile(out, all)
	if err != nil {
		fmt.Fprintf(stderr, "synth: warning: build-ID cache: read %s: %v\n", out, err)
		return
	}
	c := &buildidcache.Cache{Dir: dir}
	st := c.Fill(es)
	if n := st.Mismatch + st.Failed; n > 0 {
		why := ""
		if st.Mismatch > 0 {
			why = fmt.Sprintf("; %d no longer readable with the build ID recorded", st.Mismatch)
		}
		if len(st.Errs) > 0 {
			why += fmt.Sprintf("; %v", st.Errs[0])
		}
		fmt.Fprintf(stderr, "synth: warning: %d of %d files not put in the build-ID cache %s%s\n", n, len(es), dir, why)
	}
}
