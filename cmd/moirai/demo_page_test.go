package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench/demo"
)

func TestDemoLivePageFollowsTheRun(t *testing.T) {
	var cfg demo.Config
	stop, url, err := serveLivePage(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func() (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("before a run: status %d, want 503", code)
	}
	ctl := moirai.New()
	defer ctl.Close()
	ctl.Mutex("table:orders")
	cfg.OnController(demo.RunMoirai, ctl)
	code, body := get()
	if code != http.StatusOK || !strings.Contains(body, "table:orders") {
		t.Fatalf("during a run: status %d, body:\n%s", code, body)
	}
}
