package main

import (
	"errors"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// procMethods are the /proc methods this kernel has: procquery needs
// PROCMAP_QUERY (6.11; a 6.11+ kernel without it fails t under
// SYNTH_REQUIRE).
func procMethods(t *testing.T) []string {
	t.Helper()
	m, err := synth.OpenMethod(synth.MethodProcquery, synth.MethodOptions{Threads: 1})
	if err == nil {
		m.Close()
		return []string{synth.MethodProcmaps, synth.MethodProcquery}
	}
	if !errors.Is(err, synth.ErrNoProcquery) {
		t.Fatal(err)
	}
	testenv.Feature(t, false, "6.11", "no PROCMAP_QUERY: procquery is not checked")
	return []string{synth.MethodProcmaps}
}
