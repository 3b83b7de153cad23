package bench

// About is a case as moirai bench list shows it: its suite and name, and
// in words what it models, its contended resource, its culprit and its
// victims.
type About struct {
	Suite, Name, Models, Resource, Culprit, Victims string
}

// Named is a controller as moirai bench list shows it.
type Named struct {
	Name, Describe string
}

// Listing is a suite in words: its cases and its controllers. Each suite
// package with processes, servers or a topology of its own says its own
// (a List function); the in-process suites' are [Cases] and
// [Controllers].
type Listing struct {
	Suite       string
	Cases       []About
	Controllers []Named
}
