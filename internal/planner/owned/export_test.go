package owned

// For fuzz_test.go, an external test because it imports ownedtest, which
// imports this package.
func (c Copy) SameObject(o Copy) bool { return c.sameObject(o) }
