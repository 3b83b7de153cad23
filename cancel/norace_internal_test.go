//go:build !race

package cancel

const raceEnabled = false
