package assemble

import (
	"io/fs"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// libModules is the directory of the running kernel's module files.
func libModules() string {
	var uts unix.Utsname
	if unix.Uname(&uts) != nil {
		return ""
	}
	return "/lib/modules/" + unix.ByteSliceToString(uts.Release[:])
}

// moduleExts are the endings of module files perf recognizes: plain, or
// compressed as the distributions ship them.
var moduleExts = []string{".ko", ".ko.gz", ".ko.xz", ".ko.zst"}

// ModuleName returns the name of the module a kernel map names, as
// /proc/modules and /sys/module name it: "ext4" for "[ext4]" and for
// ".../ext4.ko.xz", "nf_conntrack" for ".../nf-conntrack.ko"; ok is false
// for a map that is not a module's.
func ModuleName(mapName string) (string, bool) {
	if n, ok := strings.CutPrefix(mapName, "["); ok {
		n, ok = strings.CutSuffix(n, "]")
		if !ok || n == "" {
			return "", false
		}
		return n, true
	}
	base := filepath.Base(mapName)
	for _, ext := range moduleExts {
		if n, ok := strings.CutSuffix(base, ext); ok && n != "" && strings.HasPrefix(mapName, "/") {
			return strings.ReplaceAll(n, "-", "_"), true
		}
	}
	return "", false
}

// modulePaths names each module map after its file under dir, as perf's
// machine__set_modules_path does, so that perf finds the module's
// symbols: a file ending in a module extension, whose base name with '-'
// as '_' is the module's. The top-level "build" and "source" links are
// not followed. A module without a file keeps its "[name]".
func modulePaths(mods []KernelMap, dir string) {
	if dir == "" {
		return
	}
	byName := make(map[string]int, len(mods))
	for i, m := range mods {
		if n, ok := ModuleName(m.name); ok {
			byName[n] = i
		}
	}
	filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory: its modules keep their names
		}
		if e.IsDir() {
			if filepath.Dir(path) == dir && (e.Name() == "build" || e.Name() == "source") {
				return filepath.SkipDir
			}
			return nil
		}
		if n, ok := ModuleName(path); ok {
			if i, ok := byName[n]; ok {
				mods[i].name = path
				delete(byName, n)
			}
		}
		return nil
	})
}
