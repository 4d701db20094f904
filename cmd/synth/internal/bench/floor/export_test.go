package floor

var (
	LoadSpec = loadFloor
	Program  = program
)
