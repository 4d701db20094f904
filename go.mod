module github.com/synth-dev/synth

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/rogpeppe/go-internal v1.16.0
	github.com/spf13/pflag v1.1.0
	golang.org/x/sys v0.49.0
)

require golang.org/x/tools v0.40.1-0.20260108161641-ca281cf95054 // indirect

tool github.com/cilium/ebpf/cmd/bpf2go
