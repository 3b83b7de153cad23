package blocking_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/moirai-go/moirai/analysis/blocking"
)

func TestFacts(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), blocking.Analyzer, "dep", "use")
}
