package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/procfs"
)

// Host describes the machine and its load when measured: what makes
// ratios differ between machines (the CPU, and the mitigations that make
// syscalls and page-table switches cost more) as well as the counts.
type Host struct {
	Kernel   string `json:"kernel"`
	CPUModel string `json:"cpu_model"`
	CPUs     int    `json:"cpus"`
	MemBytes uint64 `json:"mem_bytes"`
	// Mitigations are the kernel's words for each CPU vulnerability
	// (/sys/devices/system/cpu/vulnerabilities), by name.
	Mitigations map[string]string `json:"mitigations"`
	Processes   int               `json:"processes"`
	VMAs        int               `json:"vmas"`
}

// ReadHost describes this host now. VMAs counts the lines of every
// readable /proc/PID/maps.
func ReadHost() Host {
	var uts unix.Utsname
	unix.Uname(&uts)
	var si unix.Sysinfo_t
	unix.Sysinfo(&si)
	h := Host{Kernel: unix.ByteSliceToString(uts.Release[:]), CPUModel: cpuModel(), CPUs: runtime.NumCPU(),
		MemBytes: si.Totalram * uint64(si.Unit), Mitigations: mitigations()}
	pids, _ := procfs.Pids()
	h.Processes = len(pids)
	for _, pid := range pids {
		if maps, err := procfs.ReadMaps(pid); err == nil {
			h.VMAs += len(maps)
		}
	}
	return h
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// mitigations reads /sys/devices/system/cpu/vulnerabilities.
func mitigations() map[string]string {
	const dir = "/sys/devices/system/cpu/vulnerabilities"
	ents, _ := os.ReadDir(dir)
	m := make(map[string]string, len(ents))
	for _, e := range ents {
		if b, err := os.ReadFile(dir + "/" + e.Name()); err == nil {
			m[e.Name()] = strings.TrimSpace(string(b))
		}
	}
	return m
}

// pti says whether the kernel isolates its page tables (Meltdown's
// mitigation), which doubles what a syscall costs.
func (h Host) pti() string {
	if strings.Contains(h.Mitigations["meltdown"], "PTI") {
		return ", PTI"
	}
	return ""
}

// WriteTable prints results as a table.
func WriteTable(w io.Writer, h Host, res []Result) error {
	fmt.Fprintf(w, "host: Linux %s, %s%s, %d CPUs, %.1f GiB, %d processes, %d VMAs\n",
		h.Kernel, h.CPUModel, h.pti(), h.CPUs, float64(h.MemBytes)/(1<<30), h.Processes, h.VMAs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "method\tmedian\tmin\tmax\tmappings\trecords\tns/VMA\tpeak RSS\tvs bpf\tCPU\t")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.0f\t%.1f MiB\t%.2f×\t%s\t\n", r.Name,
			ms(r.MedianNs), ms(r.MinNs), ms(r.MaxNs), r.Mappings, r.Records, r.NsPerMapping,
			float64(r.PeakRSSBytes)/(1<<20), r.RatioToBPF, ms(r.CPUNs))
	}
	return tw.Flush()
}

func ms(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }

// Point is one size of a sweep.
type Point struct {
	VMAs    int      `json:"vmas"`
	Host    Host     `json:"host"`
	Results []Result `json:"methods"`
}

// WriteSVG plots median time against VMA count, one line per method,
// on log-log axes.
func WriteSVG(path string, pts []Point) error {
	if len(pts) == 0 {
		return nil
	}
	const W, H, L, B = 720, 480, 70, 50
	var xs []float64
	lo, hi := 1e300, 0.0
	for _, p := range pts {
		xs = append(xs, float64(p.VMAs))
		for _, r := range p.Results {
			v := float64(r.MedianNs) / 1e6
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	xlo, xhi := log10(xs[0]), log10(xs[len(xs)-1])
	if xhi == xlo {
		xhi = xlo + 1
	}
	ylo, yhi := log10(lo), log10(hi)
	if yhi == ylo {
		yhi = ylo + 1
	}
	px := func(x float64) float64 { return L + (log10(x)-xlo)/(xhi-xlo)*(W-L-160) }
	py := func(y float64) float64 { return H - B - (log10(y)-ylo)/(yhi-ylo)*(H-B-20) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><line x1="%d" y1="20" x2="%d" y2="%d" stroke="black"/>`+"\n",
		L, H-B, W-160, H-B, L, L, H-B)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">VMAs on the host (log)</text>`+"\n", (W-160+L)/2, H-10)
	fmt.Fprintf(&b, `<text x="15" y="%d" transform="rotate(-90 15 %d)" text-anchor="middle">median dump time, ms (log)</text>`+"\n", H/2, H/2)
	for _, x := range xs {
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%d</text>`+"\n", px(x), H-B+15, int(x))
	}
	for _, y := range []float64{lo, hi} {
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%.2f</text>`+"\n", L-5, py(y)+4, y)
	}
	colors := []string{"#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	for i, r := range pts[0].Results {
		var line []string
		for _, p := range pts {
			if i < len(p.Results) && p.Results[i].MedianNs > 0 {
				line = append(line, fmt.Sprintf("%.1f,%.1f", px(float64(p.VMAs)), py(float64(p.Results[i].MedianNs)/1e6)))
			}
		}
		c := colors[i%len(colors)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(line, " "))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", W-150, 30+16*i, c, r.Name)
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func log10(x float64) float64 { return math.Log10(x) }
