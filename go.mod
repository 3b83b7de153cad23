module github.com/moirai-go/moirai

go 1.25.0

require (
	github.com/google/go-cmp v0.7.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.22.0
)
