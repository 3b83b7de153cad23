package waitloop_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/moirai-go/moirai/analysis/waitloop"
)

func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), waitloop.Analyzer, "wait")
}
