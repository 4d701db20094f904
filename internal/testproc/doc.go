// Package testproc starts helper processes with deliberately unusual
// memory mappings, so that tests can compare a dump with /proc/PID/maps.
//
// The test binary re-executes itself as the helper: a test package that
// uses testproc calls Main first thing in its TestMain:
//
//	func TestMain(m *testing.M) { testproc.Main(); os.Exit(m.Run()) }
package testproc
