package browser_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/debugpage"
	"github.com/moirai-go/moirai/policy"
)

// chromiumPath finds Debian's chromium, or skips (fails under CI, where
// .ci/run installs it with scripts/install-chromium.sh).
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium under CI: scripts/install-chromium.sh installs it")
	}
	t.Skip("no chromium on the PATH: scripts/install-chromium.sh installs Debian's")
	return ""
}

// decided runs, in real time, a scan holding a table lock while inserts
// queue behind it, until the default controller has cancelled the scan
// with its explanation; it returns the decision.
func decided(t *testing.T, ctl *moirai.Controller, table *moirai.Mutex) policy.Record {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		tctx, task := ctl.Begin(ctx, moirai.Spec{Class: "scan", Key: "report <all>", Cancellable: true})
		err := table.Lock(tctx)
		if err == nil {
			for i := int64(0); i < 1000 && tctx.Err() == nil; i++ {
				time.Sleep(5 * time.Millisecond)
				task.Progress(i+1, 1000)
			}
			table.Unlock()
		}
		task.End(context.Cause(tctx))
	})
	deadline := time.Now().Add(20 * time.Second)
	for ctx.Err() == nil {
		for _, d := range ctl.Decisions() {
			if d.Action == policy.Cancel && d.Outcome == policy.Acted {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no cancellation decision within 20s")
		}
		time.Sleep(5 * time.Millisecond)
		wg.Go(func() {
			tctx, task := ctl.Begin(ctx, moirai.Spec{Class: "insert", Cancellable: true})
			err := table.Lock(tctx)
			if err == nil {
				time.Sleep(time.Millisecond)
				table.Unlock()
			}
			task.End(err)
		})
	}
	t.Fatal(ctx.Err())
	return policy.Record{}
}

// live leaves, for the rest of the test, a nightly export holding the
// table and three inserts waiting for it (none cancellable), so that the
// page has tasks, holds and waits to show.
func live(t *testing.T, ctl *moirai.Controller, table *moirai.Mutex) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	held := make(chan struct{})
	wg.Go(func() {
		tctx, task := ctl.Begin(ctx, moirai.Spec{Class: "export", Key: "nightly <export>"})
		defer task.End(nil)
		if table.Lock(tctx) != nil {
			close(held)
			return
		}
		close(held)
		<-ctx.Done()
		table.Unlock()
	})
	<-held
	for range 3 {
		wg.Go(func() {
			tctx, task := ctl.Begin(ctx, moirai.Spec{Class: "insert"})
			err := table.Lock(tctx)
			if err == nil {
				table.Unlock()
			}
			task.End(err)
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s := ctl.Snapshot()
		if len(s.Resources) == 1 && s.Resources[0].Waiters == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the inserts did not queue within 10s")
		}
	}
}

// TestPageInChromium loads the live page in headless Chromium after a real
// cancellation: the page renders without a console error, a CSP report or
// a failed load, shows the decision with its explanation, and keeps the
// task's key hidden. With MOIRAI_SCREENSHOT set to a path it also saves a
// screenshot there (scripts/debugpage-screenshot.sh writes
// docs/debugpage.png).
func TestPageInChromium(t *testing.T) {
	path := chromiumPath(t)
	ctl := moirai.New(moirai.WithSLO(0.99, 30*time.Millisecond))
	defer ctl.Close()
	table := ctl.Mutex("table:orders")
	d := decided(t, ctl, table)
	live(t, ctl, table)

	srv := httptest.NewServer(debugpage.Handler(ctl, debugpage.Config{}))
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer acancel()
	cctx, ccancel := chromedp.NewContext(actx)
	defer ccancel()
	tctx, tcancel := context.WithTimeout(cctx, 60*time.Second)
	defer tcancel()

	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(tctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, fmt.Sprintf("console.%s: %v", e.Type, e.Args))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}

	if err := chromedp.Do(tctx, chromedp.Navigate(srv.URL+"/debug/moirai"), chromedp.WaitVisible(".decision")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	title, err := chromedp.Run(tctx, chromedp.Title())
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text, err := chromedp.Run(tctx, chromedp.Text("body"))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	shot, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("page problem: %s", p)
	}
	if !strings.Contains(text, "atropos") || !strings.Contains(text, "table:orders") || !strings.Contains(text, d.Reason) {
		t.Errorf("the page does not show the decision %q with its explanation:\n%s", d.Reason, text)
	}
	if !strings.Contains(text, "export") || !strings.Contains(text, "insert") {
		t.Errorf("the page does not show the live tasks:\n%s", text)
	}
	if strings.Contains(text, "report <all>") || strings.Contains(text, "nightly <export>") {
		t.Errorf("the page shows the task's key, hidden by default")
	}
	if title == "" {
		t.Error("page without a title")
	}
	if out := os.Getenv("MOIRAI_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", out, len(shot))
	}
}
