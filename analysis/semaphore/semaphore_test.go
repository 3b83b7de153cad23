package semaphore_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/moirai-go/moirai/analysis/semaphore"
)

func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), semaphore.Analyzer, "sem")
}
