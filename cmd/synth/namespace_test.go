package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// inNamespaces runs the shell script in a new pid and mount namespace
// (with its own /proc, as a container has), with env, and fails t if
// it fails.
func inNamespaces(t *testing.T, script string, env ...string) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	testenv.Need(t, err == nil, "unshare (util-linux)")
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-ec", script)
	cmd.Env = append(os.Environ(), env...)
	if r := runCmd(t, cmd); r.code != 0 {
		t.Fatalf("in a new pid namespace: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}

// nsDump is what a dump wrote of the processes of a namespace.
type nsDump struct {
	maps  map[uint32][]string // by pid: "start-end pgoff path build-ID"
	comms map[uint32]string   // by pid, of the process's main thread
	forks map[uint32]uint32   // by pid: the parent's pid
}

// readNSDump reads the MMAP2, COMM and FORK records of a perf.data file.
func readNSDump(t *testing.T, file string) nsDump {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := perfdata.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	d := nsDump{maps: map[uint32][]string{}, comms: map[uint32]string{}, forks: map[uint32]uint32{}}
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		switch rec.Type {
		case perfdata.RecordMmap2:
			m, _, err := perfdata.ParseMmap2(rec.Data, 0)
			if err != nil || m.Prot&4 == 0 || strings.HasPrefix(m.Filename, "[") {
				continue
			}
			d.maps[m.Pid] = append(d.maps[m.Pid], fmt.Sprintf("%x-%x %x %s %s",
				m.Addr, m.Addr+m.Len, m.Pgoff, m.Filename, hex.EncodeToString(m.BuildID)))
		case perfdata.RecordComm:
			c, _, err := perfdata.ParseComm(rec.Data, 0)
			if err == nil && c.Pid == c.Tid {
				d.comms[c.Pid] = c.Comm
			}
		case perfdata.RecordFork:
			f, _, err := perfdata.ParseFork(rec.Data, 0)
			if err == nil && f.Pid == f.Tid {
				d.forks[f.Pid] = f.Ppid
			}
		}
	}
	for _, m := range d.maps {
		slices.Sort(m)
	}
	return d
}

// nsProcMaps is what a maps file says of the executable file mappings, in
// nsDump's form, each with the build ID of the file at root+path.
func nsProcMaps(t *testing.T, file, root string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	maps, err := procfs.ParseMaps(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range maps {
		if m.Prot&4 == 0 || !strings.HasPrefix(m.Path, "/") {
			continue
		}
		id := fileBuildID(t, filepath.Join(root, m.Path))
		out = append(out, fmt.Sprintf("%x-%x %x %s %s", m.Start, m.End, m.Pgoff, m.Path, hex.EncodeToString(id)))
	}
	slices.Sort(out)
	return out
}

// fileBuildID is the GNU build ID of the ELF file at path.
func fileBuildID(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	id, err := elfnote.BuildID(f, fi.Size())
	if err != nil || len(id) == 0 {
		t.Errorf("%s: no build ID: %v", path, err)
	}
	return id
}

// nsMethods are the dumps each namespace test runs, as synth dump flags.
func nsMethods(t *testing.T) map[string]string {
	m := map[string]string{"bpf": "--method bpf", "bpf-iter": "--method bpf --walk iter", "procmaps": "--method procmaps"}
	if slices.Contains(procMethods(t), synth.MethodProcquery.String()) {
		m["procquery"] = "--method procquery"
	}
	return m
}

// dumpScript dumps process $p with each method into $OUT/NAME.data,
// and copies its maps into $OUT/spin.maps first.
func dumpScript(t *testing.T, synthPath string) string {
	var b strings.Builder
	b.WriteString(`cat /proc/$p/maps >"$OUT/spin.maps"; echo $p >"$OUT/spin.pid"` + "\n")
	for name, flags := range nsMethods(t) {
		fmt.Fprintf(&b, "%s dump %s --no-kernel -p $p -o \"$OUT/%s.data\" 2>\"$OUT/%s.err\" || { cat \"$OUT/%s.err\"; exit 1; }\n",
			synthPath, flags, name, name, name)
	}
	return b.String()
}

// checkNSDumps checks every method's dump of the spinner in dir: its
// pid is the namespace's, its records are /proc's there (root: where the
// namespace's root is on the host), build IDs included.
func checkNSDumps(t *testing.T, dir, root string) uint32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "spin.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid > 10 {
		t.Fatalf("the spinner's pid in the namespace is %q: want one of its first", b)
	}
	want := nsProcMaps(t, filepath.Join(dir, "spin.maps"), root)
	if len(want) < 3 {
		t.Fatalf("/proc/%d/maps in the namespace: %v", pid, want)
	}
	for name := range nsMethods(t) {
		d := readNSDump(t, filepath.Join(dir, name+".data"))
		if got := d.maps[uint32(pid)]; !slices.Equal(got, want) {
			t.Errorf("%s: pid %d's mappings:\n%s\n/proc in the namespace:\n%s", name, pid, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if d.comms[uint32(pid)] != "spin" || d.forks[uint32(pid)] != 1 {
			t.Errorf("%s: pid %d named %q, forked from %d; want spin, from the namespace's init 1", name, pid, d.comms[uint32(pid)], d.forks[uint32(pid)])
		}
		for p := range d.maps {
			if p != uint32(pid) {
				t.Errorf("%s: -p %d wrote mappings of pid %d", name, pid, p)
			}
		}
	}
	return uint32(pid)
}

// In a container's pid namespace every method writes the numbers that
// namespace gives its processes, as its /proc and the kernel's own
// records there do, with every build ID; a dump of the whole namespace
// has its processes and no others; and perf record --synth=no piped
// through synth inject there attributes a spinner's samples as in the
// host's namespace.
func TestPidNamespace(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	spin := buildSpin(t)
	dir := t.TempDir()
	script := `"$SPIN" & p=$!; sleep 0.3` + "\n" + dumpScript(t, `"$SYNTH"`) + `
"$SYNTH" dump --no-kernel -o "$OUT/all.data" 2>"$OUT/all.err"
"$PERF" record -a --synth=no -k CLOCK_MONOTONIC -F 999 -o - -- sleep 2 2>"$OUT/perf.err" |
	"$SYNTH" inject -o "$OUT/inject.data" 2>"$OUT/inject.err"
kill $p`
	// Processes outside the namespace start and map all along: the
	// kernel reports them to the namespace's side-band as pid 0, which
	// its dumps must not write.
	outside := exec.Command("sh", "-c", "while :; do /bin/true; done")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outside.Process.Kill(); outside.Wait() })
	inNamespaces(t, script, "SPIN="+spin, "SYNTH="+synthBin, "PERF="+perf, "OUT="+dir)
	pid := checkNSDumps(t, dir, "/")

	// The whole namespace: sh (its init), the spinner, synth itself and
	// its children (the helper that reads build IDs from network
	// filesystems, "exe": a guest's root is 9p).
	all := readNSDump(t, filepath.Join(dir, "all.data"))
	synths := map[uint32]bool{}
	for p, comm := range all.comms {
		if comm == filepath.Base(synthBin) {
			synths[p] = true
		}
	}
	for p, comm := range all.comms {
		if p != 1 && p != pid && !synths[p] && !synths[all.forks[p]] {
			t.Errorf("a dump in the namespace wrote process %d (%s), which the namespace does not have", p, comm)
		}
	}
	if all.comms[1] != "sh" || all.forks[1] != 0 {
		t.Errorf("the namespace's init: %q, parent %d; want sh, 0 (its parent is outside)", all.comms[1], all.forks[1])
	}

	// The spinner's samples land on its binary and library.
	got := report(t, perf, "-i", filepath.Join(dir, "inject.data"), "--no-children", "--comms", "spin")
	user, unknown := 0.0, 0.0
	for k, v := range got {
		if !strings.HasPrefix(k, "[kernel.kallsyms] ") {
			user += v
		}
		if strings.Contains(k, "[unknown]") {
			unknown += v
		}
	}
	onSpin := got["spin main_spin"] + got["libspin.so lib_spin"]
	t.Logf("the spinner's samples: %.2f%% in user space, %.2f%% of them on its binary and library, %.2f%% unknown", user, 100*onSpin/user, unknown)
	if user <= 0 || unknown/user > 0.01 || onSpin/user < 0.9 {
		t.Errorf("synth inject in the namespace: %.2f%% on spin's binary and library of %.2f%% in user space, %.2f%% unknown: %v",
			onSpin, user, unknown, major(got))
	}
}

// lddRE is a line of ldd's output that names a library's path.
var lddRE = regexp.MustCompile(`(?:=> )?(/\S+) \(0x`)

// copyWithLibs copies the executable bin to root+dest, and every library
// it loads to root+its path, as a container image holds them.
func copyWithLibs(t *testing.T, root, bin, dest string) {
	t.Helper()
	files := map[string]string{bin: dest}
	out, err := exec.Command("ldd", bin).Output()
	if err == nil {
		for _, m := range lddRE.FindAllStringSubmatch(string(out), -1) {
			files[m[1]] = m[1]
		}
	}
	for from, to := range files {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		to = filepath.Join(root, to)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A container with a root of its own: the paths are those its /proc
// shows, under its root, not the host's, and the build IDs are those of
// the files its processes map.
func TestContainerRoot(t *testing.T) {
	testenv.Root(t)
	spin := buildSpin(t)
	root := t.TempDir()
	copyWithLibs(t, root, spin, "/app/spin")
	copyWithLibs(t, root, filepath.Join(filepath.Dir(spin), "libspin.so"), "/app/libspin.so")
	copyWithLibs(t, root, synthBin, "/app/synth")
	for _, tool := range []string{"sh", "cat", "sleep"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		copyWithLibs(t, root, path, "/bin/"+tool)
	}
	for _, d := range []string{"proc", "sys", "dev", "out"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	inside := "/app/spin & p=$!; sleep 0.3\n" + dumpScript(t, "/app/synth") + "kill $p\n"
	if err := os.WriteFile(filepath.Join(root, "app/run.sh"), []byte(inside), 0o755); err != nil {
		t.Fatal(err)
	}
	// The container: its own /proc, the host's /sys (BTF) and /dev, its
	// own root.
	script := `mount -t proc proc "$ROOT/proc"
mount --rbind /sys "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
exec chroot "$ROOT" /bin/sh -e /app/run.sh`
	inNamespaces(t, script, "ROOT="+root, "OUT=/out")
	checkNSDumps(t, filepath.Join(root, "out"), root)
	b, _ := os.ReadFile(filepath.Join(root, "out/spin.maps"))
	if !strings.Contains(string(b), " /app/spin\n") || strings.Contains(string(b), root) {
		t.Errorf("the container's /proc shows the host's paths:\n%s", b)
	}
}

// Where the BPF method cannot work, the one line says what is missing
// and auto falls back to /proc: in a user namespace, root as the process
// is there, it lacks CAP_BPF and CAP_PERFMON of the initial one.
func TestUserNamespace(t *testing.T) {
	testenv.Root(t)
	unshare, err := exec.LookPath("unshare")
	testenv.Need(t, err == nil, "unshare (util-linux)")
	// The kernel refuses a new user namespace to a chrooted process (the
	// vmtest guests run the tests in a chroot) and where
	// user.max_user_namespaces is 0: nothing of synth's to check there.
	if out, err := exec.Command(unshare, "--user", "--map-root-user", "true").CombinedOutput(); err != nil {
		t.Skipf("no user namespace can be made here (a chroot, or user.max_user_namespaces=0): not checked: %v %s", err, out)
	}
	out := filepath.Join(t.TempDir(), "perf.data")
	r := runCmd(t, exec.Command(unshare, "--user", "--map-root-user", synthBin, "dump", "--no-kernel", "-o", out))
	first, rest, _ := strings.Cut(r.stderr, "\n")
	if r.code != 0 || first != "synth: using a fallback method because bpf: bpf method: this process runs in a user namespace, "+
		"whose capabilities hold only inside it: BPF and system-wide perf events need CAP_BPF and CAP_PERFMON in the initial user namespace" {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if sum := parseSummary(t, rest); sum.method == synth.MethodBPF.String() {
		t.Errorf("auto chose bpf in a user namespace")
	}
}

// A pid namespace whose /proc is the host's numbers processes as the
// host does: every method refuses it with one line that says what to
// do, before any output is written.
func TestForeignProc(t *testing.T) {
	testenv.Root(t)
	unshare, err := exec.LookPath("unshare")
	testenv.Need(t, err == nil, "unshare (util-linux)")
	out := filepath.Join(t.TempDir(), "perf.data")
	r := runCmd(t, exec.Command(unshare, "--pid", "--fork", "--kill-child", synthBin, "dump", "-o", out))
	oneLine(t, r, "the /proc mounted here is another pid namespace's", "mount this namespace's own /proc")
}
