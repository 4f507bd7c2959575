package drain

// For fuzz_test.go, an external test because it imports draintest, which
// imports this package.
const (
	CrossCheckAfter = drainageCrossCheckAfter
	CrossCheckEvery = drainageCrossCheckEvery
)
