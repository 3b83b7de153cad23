package debugpage_test

import (
	"net/http"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/debugpage"
)

func ExampleHandler() {
	ctl := moirai.New()
	defer ctl.Close()
	mux := http.NewServeMux()
	// Keys stay hidden (ShowKeys false); ?format=json serves the same data.
	mux.Handle("/debug/moirai", debugpage.Handler(ctl, debugpage.Config{}))
	// Serve mux on an internal or loopback address.
}
