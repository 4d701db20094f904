package buildidcache

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// systemConfig is perf's system-wide config (perf_etc_perfconfig()).
var systemConfig = "/etc/perfconfig"

// maxConfig bounds a config file read.
const maxConfig = 1 << 20

// Dir returns the build-ID cache directory perf 6.1 uses, as
// set_buildid_dir(NULL) finds it: buildid.dir from perf's config, else
// $HOME/.debug. The config is the file PERF_CONFIG names if it is set,
// else /etc/perfconfig (unless PERF_CONFIG_NOSYSTEM is true) and then
// $HOME/.perfconfig, whose value wins; perf ignores a ~/.perfconfig
// owned by another user than the effective one or root, and so does
// Dir. PERF_BUILDID_DIR is not read: perf 6.1 overwrites it.
func Dir() (string, error) {
	home := os.Getenv("HOME")
	dir := ""
	if f, ok := os.LookupEnv("PERF_CONFIG"); ok {
		dir = configDir(f, false)
	} else {
		if !envTrue("PERF_CONFIG_NOSYSTEM") {
			dir = configDir(systemConfig, false)
		}
		if home != "" {
			if d := configDir(filepath.Join(home, ".perfconfig"), true); d != "" {
				dir = d
			}
		}
	}
	if dir != "" {
		return dir, nil
	}
	if home == "" {
		return "", errors.New("no build-ID cache: HOME is not set and perf's config sets no buildid.dir")
	}
	return filepath.Join(home, ".debug"), nil
}

// envTrue is perf_env_bool: a variable set to a true value.
func envTrue(name string) bool {
	switch strings.ToLower(os.Getenv(name)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// configDir returns the last buildid.dir set in the config file at
// path, or "". user applies perf's check of ~/.perfconfig's owner.
func configDir(path string, user bool) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return ""
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && user && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return ""
	}
	return parseConfigDir(bufio.NewScanner(io.LimitReader(f, maxConfig)))
}

// parseConfigDir reads perf's config syntax (git's): [section] lines,
// key = value lines, # and ; comments, double-quoted values with
// backslash escapes; section and key names are case-insensitive.
func parseConfigDir(sc *bufio.Scanner) string {
	section, dir := "", ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				section = ""
				continue
			}
			section = strings.ToLower(strings.TrimSpace(line[1:end]))
			line = strings.TrimSpace(line[end+1:])
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section != "buildid" || strings.ToLower(strings.TrimSpace(key)) != "dir" {
			continue
		}
		if v := configValue(value); v != "" {
			dir = v
		}
	}
	return dir
}

// configValue parses a value: blanks around it dropped, quotes and
// escapes resolved, a comment outside quotes ending it.
func configValue(s string) string {
	var b strings.Builder
	quoted, pending := false, ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(pending)
			pending = ""
			quoted = !quoted
		case c == '\\' && i+1 < len(s):
			b.WriteString(pending)
			pending = ""
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			default:
				b.WriteByte(s[i])
			}
		case !quoted && (c == '#' || c == ';'):
			return b.String()
		case !quoted && (c == ' ' || c == '\t'):
			if b.Len() > 0 {
				pending += string(c) // kept only if more follows
			}
		default:
			b.WriteString(pending)
			pending = ""
			b.WriteByte(c)
		}
	}
	return b.String()
}
