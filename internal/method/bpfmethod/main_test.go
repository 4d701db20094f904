package bpfmethod

import (
	"os"
	"testing"

	"github.com/synth-dev/synth/internal/testproc"
)

func TestMain(m *testing.M) {
	testproc.Main()
	os.Exit(m.Run())
}
