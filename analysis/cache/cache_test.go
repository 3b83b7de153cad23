package cache_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/moirai-go/moirai/analysis/cache"
)

func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), cache.Analyzer, "caches")
}
