package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MapsScanner parses /proc/PID/maps files, one after another, in place
// from one reused buffer: no allocation per line, and, with execOnly, a
// line decided on its permission column before the rest is parsed. It is
// the procmaps method's reader; ParseMaps is the plain parser the tests
// hold it to. A MapsScanner is not safe for concurrent use; its zero
// value is ready.
type MapsScanner struct {
	buf   []byte
	paths map[string]string // interned paths: one string per name seen
}

// scanBuf is the read size: about 800 lines per read(2), each of which
// the kernel starts by finding its place in the VMA tree again.
const scanBuf = 64 << 10

// maxPaths bounds the interned names; past it the table starts over.
const maxPaths = 1 << 14

// Scan reads maps text from r to its end and calls fn with each mapping,
// in order; with execOnly, with the executable ones only. The mapping's
// Path stays valid after fn returns.
func (s *MapsScanner) Scan(r io.Reader, execOnly bool, fn func(*Mapping)) error {
	if s.buf == nil {
		s.buf = make([]byte, scanBuf)
	}
	var m Mapping
	n, have := 1, 0
	for eof := false; !eof; {
		k, err := r.Read(s.buf[have:])
		have += k
		if errors.Is(err, io.EOF) {
			eof = true
		} else if err != nil {
			return err
		}
		done := 0
		for done < have {
			nl := bytes.IndexByte(s.buf[done:have], '\n')
			if nl < 0 {
				if !eof {
					break
				}
				nl = have - done // the last line, without its newline
			}
			line := s.buf[done : done+nl]
			done += min(nl+1, have-done)
			ok, err := s.parse(line, execOnly, &m)
			if err != nil {
				return fmt.Errorf("maps line %d: %w", n, err)
			}
			if ok {
				fn(&m)
			}
			n++
		}
		have = copy(s.buf, s.buf[done:have])
		if have == len(s.buf) {
			return fmt.Errorf("maps line %d: longer than %d bytes", n, len(s.buf))
		}
	}
	return nil
}

// parse reads "start-end perms offset maj:min inode   path" into m; with
// execOnly, a mapping that is not executable is left unparsed (false).
func (s *MapsScanner) parse(l []byte, execOnly bool, m *Mapping) (bool, error) {
	if len(l) > maxLine {
		return false, fmt.Errorf("line of %d bytes", len(l))
	}
	sp := bytes.IndexByte(l, ' ')
	if sp < 0 || len(l) < sp+6 || l[sp+5] != ' ' {
		return false, fmt.Errorf("malformed %q", l)
	}
	perms := l[sp+1 : sp+5]
	if !validPerms(perms) {
		return false, fmt.Errorf("malformed %q", l)
	}
	if execOnly && perms[2] != 'x' {
		return false, nil
	}
	*m = Mapping{}
	var ok [6]bool
	lo, hi, _ := bytes.Cut(l[:sp], []byte("-"))
	m.Start, ok[0] = parseHex(lo, 64)
	m.End, ok[1] = parseHex(hi, 64)
	rest := l[sp+6:]
	var f []byte
	f, rest = cutByte(rest, ' ')
	m.Pgoff, ok[2] = parseHex(f, 64)
	f, rest = cutByte(rest, ':')
	maj, ok3 := parseHex(f, 32)
	f, rest = cutByte(rest, ' ')
	min, ok4 := parseHex(f, 32)
	ok[3], ok[4] = ok3, ok4
	f, rest = cutByte(rest, ' ')
	m.Ino, ok[5] = parseDec(f)
	if ok != [6]bool{true, true, true, true, true, true} {
		return false, fmt.Errorf("malformed %q", l)
	}
	m.Maj, m.Min = uint32(maj), uint32(min)
	m.setPerms(perms[0], perms[1], perms[2], perms[3])
	m.Path = s.intern(bytes.TrimLeft(rest, " "))
	return true, nil
}

// validPerms reports whether p reads as the kernel writes it: "rwxp"
// with '-' for a permission not given and 's' for a shared mapping.
func validPerms(p []byte) bool {
	return (p[0] == 'r' || p[0] == '-') && (p[1] == 'w' || p[1] == '-') &&
		(p[2] == 'x' || p[2] == '-') && (p[3] == 'p' || p[3] == 's')
}

// intern returns b as a string, allocated only the first time it is seen.
func (s *MapsScanner) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if p, ok := s.paths[string(b)]; ok {
		return p
	}
	if s.paths == nil || len(s.paths) >= maxPaths {
		s.paths = make(map[string]string)
	}
	p := string(b)
	s.paths[p] = p
	return p
}

// cutByte splits b at the first c, which it drops; without c, all of b
// is the field.
func cutByte(b []byte, c byte) (field, rest []byte) {
	if i := bytes.IndexByte(b, c); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// parseHex reads a hex number of at most bits bits; strconv.ParseUint
// would do, on a string the line would have to be copied into.
func parseHex(b []byte, bits uint) (uint64, bool) {
	var v uint64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		if v>>(bits-4) != 0 {
			return 0, false // overflow
		}
		v = v<<4 | uint64(d)
	}
	return v, len(b) > 0
}

// parseDec reads a decimal uint64.
func parseDec(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false // overflow
		}
		v = v*10 + d
	}
	return v, len(b) > 0
}
