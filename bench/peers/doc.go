// Package peers measures moirai side by side with the Go overload-control
// libraries people use today, in one run: go-concurrency-limits,
// failsafe-go, aegis and sentinel-golang. It is its own module so that
// none of them is ever a dependency of moirai itself.
//
// The benchmarks of admission_test.go time the per-call cost of each
// library's admission decision on an uncontended, unloaded limiter: the
// check at a request's arrival and whatever the library needs told when
// the request ends.
//
//	cd bench/peers && go test -run '^$' -bench Admit -benchmem
package peers
