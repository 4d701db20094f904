// Package bench runs every synthesis method side by side on one host,
// each run in its own process (so peak RSS is per method), interleaved,
// and summarizes the runs: the engine of `synth bench`.
package bench
