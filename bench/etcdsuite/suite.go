// Package etcdsuite is the etcd suite of moirai bench: a real server's
// reported overload, etcd's "large range blocks writes" (etcd-io/etcd#7719
// and #8202), on etcd v3.7's released source, under no control, under
// moirai integrated by a patch, and under the remedies an etcd operator
// has today. Package serversuite runs it (see there for its runs).
//
// The server and its load are the integration module's program
// (integrations/etcd, cmd/etcdload): etcd in process (package embed, on
// loopback) and an open-loop load on the official client, built twice by
// the module's cmd/etcdbuild (on the released server, and on its source
// with etcd.patch applied).
//
// Each round starts the released build once per case (runs: the load
// without the culprit, then under none, timeout, ratelimit and paginate,
// on one server and its keys) and the patched build once under moirai
// and once under the oracle.
package etcdsuite

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai/bench/serversuite"
)

// Suite is the suite's name in rows and on the command line.
const Suite = "etcd"

// Defaults of serversuite.Options.
const (
	DefaultDuration = 4 * time.Second
	DefaultWarmup   = time.Second
	// DefaultKeys is the key space of etcd-io/etcd#7719: its large read took
	// 300,000 of 600,000 keys.
	DefaultKeys = 600_000
)

// Spec is the suite, for package serversuite to run; its Size is
// cmd/etcdload's -keys.
var Spec = &serversuite.Suite{
	Name: Suite, Server: "etcd", ServerModule: "go.etcd.io/etcd/server/v3",
	Module: "etcd", Build: "./cmd/etcdbuild",
	Models: "etcd v3.7.3, patched", Resource: "mvcc index lock, apply loop",
	Cases: []serversuite.Case{
		{Name: "keys-only", Args: []string{"-culprit", "keys"}, Describe: "every second, a keys-only range over half the keys (etcdctl get --keys-only, etcd-io/etcd#8202)"},
		{Name: "full-range", Args: []string{"-culprit", "full"}, Describe: "every second, a range over half the keys with their values (etcd-io/etcd#7719)"},
	},
	Controllers: []serversuite.Controller{
		{Name: "none", Describe: "etcd v3.7.3 as released"},
		{Name: "moirai", Describe: "etcd v3.7.3 with integrations/etcd/etcd.patch: requests as tasks (grpcmw), the mvcc index lock and the wait for the apply loop traced, the range's context in the index walk", Patched: true},
		{Name: "oracle", Describe: "etcd v3.7.3 with etcd.patch and no controller: an oracle that knows the large ranges by construction cancels their walks the moment a write finds the index lock taken (moiraietcd.InstallOracle), the bound of any controller acting on evidence", Patched: true, Oracle: true},
		{Name: "timeout", Describe: "released; the client gives the large range a 100ms deadline (the server's index walk does not look at it)"},
		{Name: "ratelimit", Describe: "released; the client sends at most one large range every 3s (a token bucket, burst 1): the others are skipped"},
		{Name: "paginate", Describe: "released; the large range in pages of 1,000 keys at one revision, as kube-apiserver's chunked lists"},
	},
	DefaultDuration: DefaultDuration, DefaultWarmup: DefaultWarmup,
	Size: "keys", DefaultSize: DefaultKeys,
	Params: func(o serversuite.Options) map[string]string {
		return map[string]string{
			"server":  "etcd in process (embed), loopback, --unsafe-no-fsync (the disk is shared); one server per build, case and round",
			"keys":    fmt.Sprintf("%d under /registry/pods/, 128-byte values, loaded before the runs", o.Size),
			"victims": "open loop, 300 puts/s to 1,000 keys of their own and 300 ranges/s over 10 keys of the large key space; latency from the scheduled time; objective p99 ≤ 50ms",
		}
	},
	Failed: "failed", Limiter: true,
}
