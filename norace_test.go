//go:build !race

package moirai_test

const raceEnabled = false
