module github.com/moirai-go/moirai/cmd

go 1.25.0

replace github.com/moirai-go/moirai => ../

replace github.com/moirai-go/moirai/grpcmw => ../grpcmw

replace github.com/moirai-go/moirai/metrics => ../metrics

replace github.com/moirai-go/moirai/guard => ../guard

replace github.com/moirai-go/moirai/bench => ../bench

replace github.com/moirai-go/moirai/analysis => ../analysis

require (
	github.com/go-sql-driver/mysql v1.9.3
	github.com/google/go-cmp v0.7.0
	github.com/moirai-go/moirai v0.0.0-00010101000000-000000000000
	github.com/moirai-go/moirai/analysis v0.0.0-00010101000000-000000000000
	github.com/moirai-go/moirai/bench v0.0.0-00010101000000-000000000000
	github.com/moirai-go/moirai/guard v0.0.0-00010101000000-000000000000
	github.com/moirai-go/moirai/metrics v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.22.0
	github.com/prometheus/common v0.62.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/tools v0.49.0
)

require (
	filippo.io/edwards25519 v1.1.0 // indirect
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.7.6 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/moirai-go/moirai/grpcmw v0.0.0-00010101000000-000000000000 // indirect
	github.com/moirai-go/moirai/integrations/serverbuild v0.0.0-00010101000000-000000000000 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/mod v0.39.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260526163538-3dc84a4a5aaa // indirect
	google.golang.org/grpc v1.83.2 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace github.com/moirai-go/moirai/integrations/serverbuild => ../integrations/serverbuild
