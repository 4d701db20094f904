package mapread

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
)

// envHelper marks the re-executed binary as a helper.
const envHelper = "SYNTH_MAPREAD_HELPER"

// ErrHelperGone is returned by Helper.Read when the helper process
// ended before it answered: the file is unread.
var ErrHelperGone = errors.New("mapread helper process ended")

func init() {
	if os.Getenv(envHelper) == "1" {
		serve(os.Stdin, os.Stdout)
		// Reads that never end stay behind: exit_group takes the rest.
		os.Exit(0)
	}
}

type request struct {
	I    uint64
	Path string
}

type reply struct {
	I uint64
	Result
}

// serve reads requests from r until it ends, each on a goroutine of its
// own, and writes each reply to w when its read is done.
func serve(r io.Reader, w io.Writer) {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	dec := json.NewDecoder(r)
	for {
		var req request
		if dec.Decode(&req) != nil {
			return
		}
		go func() {
			res := Read(req.Path)
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(reply{req.I, res}) // a parent gone is no error here
		}()
	}
}

// Helper reads files in a helper process, started at the first Read and
// again after one ended. Any number of reads may run at once; a read
// that never ends holds up only its own caller. The zero Helper is
// ready to use; Close ends the process.
type Helper struct {
	mu     sync.Mutex
	cur    *helperProc
	next   uint64
	closed bool
}

// helperProc is one helper process and the reads waiting on it.
type helperProc struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	enc     *json.Encoder
	waiting map[uint64]chan Result // guarded by Helper.mu
	gone    bool
}

// Read reads path (a map_files entry) as Read does, in the helper. It
// returns when the helper answers, or with ErrHelperGone when the
// helper ends first; a caller that cannot wait that long leaves the
// call behind.
func (h *Helper) Read(path string) (Result, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return Result{}, os.ErrClosed
	}
	p, err := h.proc()
	if err != nil {
		h.mu.Unlock()
		return Result{}, err
	}
	h.next++
	i, ch := h.next, make(chan Result, 1)
	p.waiting[i] = ch
	err = p.enc.Encode(request{i, path})
	h.mu.Unlock()
	if err != nil {
		h.end(p)
		return Result{}, fmt.Errorf("mapread helper: %w", err)
	}
	res, ok := <-ch
	if !ok {
		return Result{}, ErrHelperGone
	}
	return res, nil
}

// proc returns the running helper process, starting one if there is
// none. h.mu is held.
func (h *Helper) proc() (*helperProc, error) {
	if h.cur != nil && !h.cur.gone {
		return h.cur, nil
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), envHelper+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("mapread helper: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("mapread helper: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start mapread helper: %w", err)
	}
	p := &helperProc{cmd: cmd, in: in, enc: json.NewEncoder(in), waiting: make(map[uint64]chan Result)}
	h.cur = p
	go h.replies(p, out)
	return p, nil
}

// replies hands the helper's replies to the reads waiting for them,
// until its output ends.
func (h *Helper) replies(p *helperProc, out io.Reader) {
	dec := json.NewDecoder(out)
	for {
		var rep reply
		if dec.Decode(&rep) != nil {
			break
		}
		h.mu.Lock()
		if ch, ok := p.waiting[rep.I]; ok {
			delete(p.waiting, rep.I)
			ch <- rep.Result
		}
		h.mu.Unlock()
	}
	h.end(p)
}

// end forgets helper process p, fails the reads waiting on it and
// kills it. It is reaped when it has exited, which a thread of it
// waiting on a FUSE server that never answers may put off for ever:
// the wait is on a goroutine of its own.
func (h *Helper) end(p *helperProc) {
	h.mu.Lock()
	if p.gone {
		h.mu.Unlock()
		return
	}
	p.gone = true
	for i, ch := range p.waiting {
		close(ch)
		delete(p.waiting, i)
	}
	h.mu.Unlock()
	p.in.Close()
	_ = p.cmd.Process.Kill()
	go p.cmd.Wait() //nolint:errcheck // only reaps
}

// Close ends the helper process; reads still waiting return
// ErrHelperGone. It does not wait for the process to exit.
func (h *Helper) Close() error {
	h.mu.Lock()
	h.closed = true
	p := h.cur
	h.mu.Unlock()
	if p != nil {
		h.end(p)
	}
	return nil
}
