// Command synth synthesizes perf records for the mappings that already
// exist on a Linux host and writes them as perf.data that the perf tools
// read. Its commands:
//
//	synth dump [-o FILE] [-p PID[,PID...]] [-d] [--no-kernel] [-B] ...
//	synth record [-e EVENT] [-F HZ|max | -c N] [-a | -p PID | -t TID | -u USER | -G CGROUP] [-g] [-o FILE] [[--] CMD ARGS]
//	perf record -k CLOCK_MONOTONIC --synth=no ... -o - | synth inject [-o FILE]
//	synth bench [--sweep 10k,100k,500k] [--reps N] [--json]
//	synth loadgen [--vmas N]
//
// Command lines read as perf's do (bundled short options, attached
// values, --long=value, --no-X; options end at the first non-option).
// 'synth CMD -h' lists a command's flags. Each flag maps onto an option of
// package synth, which does the work; this command only parses, opens
// the output and reports. Exit status: 0 done, 1 the job failed (missing
// privilege, unwritable output, lost records), 2 a bad command line.
package main
