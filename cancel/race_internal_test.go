//go:build race

package cancel

// raceEnabled: the race detector is on; the generated tests run fewer
// seeds (they are single-goroutine and the detector slows them tenfold).
const raceEnabled = true
