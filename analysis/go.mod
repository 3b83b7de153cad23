module github.com/moirai-go/moirai/analysis

go 1.25.0

require (
	github.com/google/go-cmp v0.7.0
	go.uber.org/goleak v1.3.0
	golang.org/x/tools v0.49.0
)

require (
	github.com/stretchr/testify v1.11.1 // indirect
	golang.org/x/mod v0.39.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
