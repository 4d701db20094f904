// Package procfs reads what /proc says about processes: their mappings
// (/proc/PID/maps) and their threads' names, and the kernel's CPU lists
// (sysfs). The tests use it as the oracle a dump is compared with.
package procfs
