// Package hostarch names what differs between the architectures synth
// runs on, where a path or a constant depends on it: the host's multiarch
// triplet, under which Debian (and Ubuntu) keep its shared libraries.
package hostarch

import "runtime"

// triplets are the GNU multiarch triplets of the architectures Debian
// ships, by GOARCH (Debian's ArchitectureSpecificsMemo).
var triplets = map[string]string{
	"amd64":    "x86_64-linux-gnu",
	"arm64":    "aarch64-linux-gnu",
	"386":      "i386-linux-gnu",
	"arm":      "arm-linux-gnueabihf",
	"ppc64le":  "powerpc64le-linux-gnu",
	"riscv64":  "riscv64-linux-gnu",
	"s390x":    "s390x-linux-gnu",
	"loong64":  "loongarch64-linux-gnu",
	"mips64le": "mips64el-linux-gnuabi64",
}

// Triplet is the multiarch triplet of the architecture synth was built
// for, e.g. x86_64-linux-gnu or aarch64-linux-gnu ("" for one Debian
// does not ship).
func Triplet() string { return triplets[runtime.GOARCH] }

// LibDir is the directory of the host's shared libraries:
// /usr/lib/TRIPLET.
func LibDir() string { return "/usr/lib/" + Triplet() }
