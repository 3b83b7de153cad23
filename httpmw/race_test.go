//go:build race

package httpmw_test

const raceEnabled = true
