// Package config declares, once, what a dump is asked and what it
// reports. Package synth gives them their public names, as aliases
// (synth.Stats is config.Stats, as os.FileMode is fs.FileMode); the
// methods (internal/method/...) and the assembler take them as they are.
//
// It imports neither synth nor a method: both import it.
package config
