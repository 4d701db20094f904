// Package config declares, once, what a dump is asked and what it
// reports: the Options (with their Target), the Stats, and the names of
// the walks and methods. Package synth gives them their public names,
// as aliases (synth.Options is config.Options, as os.FileMode is
// fs.FileMode); the methods (internal/method/...) and the assembler
// take them as they are, with the target resolved to processes
// (Resolved).
//
// It imports neither synth nor a method: both import it.
package config
