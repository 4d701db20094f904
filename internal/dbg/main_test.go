package dbg

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/synth-dev/synth/synth"
)

func TestDbg(t *testing.T) {
	c := exec.Command("sh", "-c", "while :; do :; done")
	c.Start()
	defer c.Process.Kill()
	time.Sleep(300 * time.Millisecond)
	for range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var buf bytes.Buffer
		st, err := synth.Profile(ctx, synth.ProfileOptions{Pids: []int{c.Process.Pid}, Freq: 1000}, &buf, synth.WriteOptions{})
		cancel()
		t.Logf("%+v %v", st.Session, err)
	}
}
