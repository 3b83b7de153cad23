// Package promsuite is the prometheus suite of moirai bench: a real
// server's reported overload, Prometheus's heavy queries holding the PromQL
// engine's --query.max-concurrency slots while light queries wait behind
// them, on Prometheus v0.316.0's released source, under no control, under
// moirai integrated by a patch, and under the remedies a Prometheus
// operator has today. Package serversuite runs it (see there for its
// runs).
//
// The server and its load are the integration module's program
// (integrations/prometheus, cmd/promload): Prometheus's TSDB, engine and
// HTTP API in process, on loopback, and an open-loop load on the official
// client (client_golang), built twice by the module's cmd/prombuild (on
// the released module, and on its source with prometheus.patch applied).
//
// Each round starts the released build once (runs: the load without the
// culprit, then under none, timeout, max-samples and concurrency, on one
// process and its data, each run on an engine and API of its own) and the
// patched build once (moirai). A remedy that fails victims (the engine's
// timeout counts their wait for a slot) is measured, not broken: the
// failures are the row's drop rate.
package promsuite

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai/bench/serversuite"
)

// Suite is the suite's name in rows and on the command line.
const Suite = "prometheus"

// Defaults of serversuite.Options.
const (
	DefaultDuration = 6 * time.Second
	DefaultWarmup   = time.Second
	// DefaultSeries is the series loaded: http_requests_total of 200
	// jobs, one hour at a 15s scrape interval.
	DefaultSeries = 5_000
)

// Spec is the suite, for package serversuite to run; its Size is
// cmd/promload's -series, a case's Args its -parallel: the dashboard's
// heavy queries per refresh, sent at once.
var Spec = &serversuite.Suite{
	Name: Suite, Server: "Prometheus", ServerModule: "github.com/prometheus/prometheus",
	Module: "prometheus", Build: "./cmd/prombuild",
	Models: "Prometheus v0.316.0, patched", Resource: "PromQL engine's query slots", Victims: "light instant queries",
	Cases: []serversuite.Case{
		{Name: "dashboard", Args: []string{"-parallel", "2"}, Describe: "every 2s, a dashboard refresh: 2 range queries at once, a rate over every series summed by job over 30 minutes, as many as the engine has slots"},
	},
	Controllers: []serversuite.Controller{
		{Name: "none", Describe: "Prometheus v0.316.0 as released, --query.max-concurrency=2 (the machine's cores)"},
		{Name: "moirai", Describe: "Prometheus v0.316.0 with integrations/prometheus/prometheus.patch: API requests as tasks (httpmw), the engine's query slots a moirai semaphore (its QueryTracker wrapped), the evaluation's progress reported", Patched: true},
		{Name: "oracle", Describe: "released, and an oracle that knows the range queries by construction cancels the one that took a slot last the moment another query is about to wait for a slot, the bound of any controller acting on evidence", Oracle: true},
		{Name: "timeout", Describe: "released; --query.timeout=500ms: the engine stops a query past it (Prometheus's default is 2m)"},
		{Name: "max-samples", Describe: "released; --query.max-samples=200000: the engine refuses a query that loads more samples at once (the default is 50,000,000)"},
		{Name: "concurrency", Describe: "released; --query.max-concurrency raised to 20 (Prometheus's default): no query waits for a slot, all share the CPUs"},
	},
	DefaultDuration: DefaultDuration, DefaultWarmup: DefaultWarmup,
	Size: "series", DefaultSize: DefaultSeries,
	Params: func(o serversuite.Options) map[string]string {
		return map[string]string{
			"server":  "Prometheus's TSDB, PromQL engine and HTTP API (web/api/v1) in process, loopback; --query.max-concurrency=2 but in the concurrency row; one process per build, case and round, one engine and API per run",
			"series":  fmt.Sprintf("%d series of http_requests_total (200 jobs), one hour at a 15s scrape interval, appended before the runs", o.Size),
			"victims": "open loop, 100 instant queries/s, sum(rate(http_requests_total{job=J}[5m])) for a random job J of 25 series; latency from the scheduled time; objective p99 ≤ 50ms",
		}
	},
	FailuresMeasured: true, Failed: "refused or failed",
}
