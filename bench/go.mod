module github.com/moirai-go/moirai/bench

go 1.25.0

replace github.com/moirai-go/moirai => ../

replace github.com/moirai-go/moirai/grpcmw => ../grpcmw

replace github.com/moirai-go/moirai/metrics => ../metrics

replace github.com/moirai-go/moirai/guard => ../guard

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/go-sql-driver/mysql v1.9.3
	github.com/google/go-cmp v0.7.0
	github.com/jackc/pgx/v5 v5.7.6
	github.com/moirai-go/moirai v0.0.0-00010101000000-000000000000
	github.com/moirai-go/moirai/grpcmw v0.0.0-00010101000000-000000000000
	github.com/moirai-go/moirai/guard v0.0.0-00010101000000-000000000000
	github.com/moirai-go/moirai/metrics v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.22.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.83.2
	google.golang.org/protobuf v1.36.11
)

require (
	filippo.io/edwards25519 v1.1.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/moirai-go/moirai/integrations/serverbuild v0.0.0-00010101000000-000000000000
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.62.0 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260526163538-3dc84a4a5aaa // indirect
)

replace github.com/moirai-go/moirai/integrations/serverbuild => ../integrations/serverbuild
