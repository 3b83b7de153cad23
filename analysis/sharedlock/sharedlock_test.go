package sharedlock_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/moirai-go/moirai/analysis/sharedlock"
)

func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), sharedlock.Analyzer, "locks")
}
