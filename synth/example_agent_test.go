package synth_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/synth-dev/synth/synth"
)

// A whole-host profiler agent: a Session with samples and unmaps keeps
// a Table current, and each sample resolves to a file, an offset in it
// and the file's build ID, what a symbolizer needs. A process loads
// libspin.so once the session has begun, and spins in it; the first of
// its samples there is resolved (and checked against /proc/PID/maps and
// the file's ELF note). Records the kernel drops when the host outruns
// the agent (a full ring: SessionStats.LiveLost) leave the table behind
// until the next dump, so the agent dumps again when it sees a loss.
func Example_agent() {
	child, err := startDlspin()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer child.stop()
	s, err := synth.NewSession(synth.SessionOptions{Sample: &synth.SampleOptions{Freq: 999}, Unmaps: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Dump(ctx); err != nil {
		fmt.Println(err)
		return
	}
	dumping, loaded, lost := true, false, uint64(0)
	table := synth.NewTable()
	var rec synth.Record
	for {
		if err := s.ReadContext(ctx, &rec); err != nil {
			fmt.Println(err)
			return
		}
		if err := table.Apply(&rec); err != nil { // every record, samples and unmaps too
			fmt.Println(err)
			return
		}
		if rec.Kind == synth.KindDumpEnd {
			dumping = false
			if !loaded {
				child.load() // dlopen(libspin.so), after the dump: the live stream reports it
				loaded = true
			}
		}
		if st := s.Stats(); st.LiveLost+st.Lost != lost && !dumping {
			lost = st.LiveLost + st.Lost
			if err := s.Dump(ctx); err != nil { // the dump brings the table up to date
				fmt.Println(err)
				return
			}
			dumping = true
		}
		sample, ok := rec.Sample()
		if !ok || sample.Pid != child.pid {
			continue
		}
		loc, ok := table.Resolve(sample.Pid, sample.IP)
		if ok && loc.Kind == synth.LocationFile && filepath.Base(loc.Mapping.Path) == "libspin.so" {
			// loc.Offset and loc.Mapping.BuildID are what a symbolizer
			// looks the file's symbols up by.
			fmt.Println("resolved:", filepath.Base(loc.Mapping.Path), checkLocation(child.pid, loc))
			return
		}
	}
	// Output: resolved: libspin.so offset ok build-id ok
}

// dlspin is testdata/dlspin, waiting to load testdata/spin's libspin.so.
type dlspin struct {
	pid     uint32
	dir     string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies *bufio.Scanner
}

// startDlspin builds dlspin and libspin.so with gcc and starts dlspin.
func startDlspin() (*dlspin, error) {
	dir, err := os.MkdirTemp("", "dlspin")
	if err != nil {
		return nil, err
	}
	c := &dlspin{dir: dir, cmd: exec.Command(filepath.Join(dir, "dlspin"))}
	for _, args := range [][]string{
		{"-O1", "-fPIC", "-shared", "-o", filepath.Join(dir, "libspin.so"), "../testdata/spin/libspin.c"},
		{"-O1", "-o", filepath.Join(dir, "dlspin"), "../testdata/dlspin/dlspin.c", "-ldl"},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("gcc %v: %v\n%s", args, err, out)
		}
	}
	c.stdin, _ = c.cmd.StdinPipe()
	stdout, _ := c.cmd.StdoutPipe()
	c.replies = bufio.NewScanner(stdout)
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.pid = uint32(c.cmd.Process.Pid)
	return c, nil
}

// load has dlspin dlopen() libspin.so, and waits until it has.
func (c *dlspin) load() {
	fmt.Fprintln(c.stdin, filepath.Join(c.dir, "libspin.so"))
	if c.replies.Scan(); c.replies.Text() != "ok" {
		fmt.Println("dlspin:", c.replies.Text())
	}
}

func (c *dlspin) stop() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
	os.RemoveAll(c.dir)
}

// checkLocation says whether loc agrees with what /proc/PID/maps says of
// its address, and with the build ID in its file's ELF note: "offset ok
// build-id ok", or what differs.
func checkLocation(pid uint32, loc synth.Location) string {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return err.Error()
	}
	offset := "offset: no line of /proc/PID/maps holds the address"
	for _, line := range strings.Split(string(maps), "\n") {
		var start, end, off uint64
		var perms string
		f := strings.Fields(line)
		if _, err := fmt.Sscanf(line, "%x-%x %s %x", &start, &end, &perms, &off); err != nil || loc.Addr < start || loc.Addr >= end {
			continue
		}
		offset = "offset ok"
		if want := loc.Addr - start + off; want != loc.Offset || f[len(f)-1] != loc.Mapping.Path {
			offset = fmt.Sprintf("offset %#x of %s; /proc/%d/maps: %#x of %s", loc.Offset, loc.Mapping.Path, pid, want, f[len(f)-1])
		}
	}
	if id := elfBuildID(loc.Mapping.Path); id == nil || !bytes.Equal(id, loc.Mapping.BuildID) { // debug/elf's
		return fmt.Sprintf("%s build-id %x; the file's: %x", offset, loc.Mapping.BuildID, id)
	}
	return offset + " build-id ok"
}
