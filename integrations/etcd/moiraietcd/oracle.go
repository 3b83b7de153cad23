package moiraietcd

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errOracle is the cause of the calls the oracle cancels.
var errOracle = errors.New("moiraietcd: cancelled by the oracle")

// oracle is what [InstallOracle] installs: the measuring bound of a
// controller that acts on evidence. It knows the culprits by construction
// (the load marks them) and, the moment a writer finds the index lock
// taken while culprits hold it for reading, cancels them through their
// contexts; the walks stop at their next look at the context. A
// controller that must first see a wait to know there is contention
// cannot act sooner.
type oracle struct {
	mu        sync.Mutex
	holding   map[*culpritCall]int // read holds of each culprit call
	cancelled int
}

// culpritCall is a culprit's call, as the oracle's interceptor marks it.
type culpritCall struct {
	cancel    context.CancelCauseFunc
	cancelled bool
}

type culpritKey struct{}

// InstallOracle makes the index locks created from now on plain locks
// watched by an oracle, for measuring: culprit says, from a call's
// context, whether the call is a culprit (the load that sent it knows).
// It returns the interceptor that gives each culprit's call a context the
// oracle can cancel, and answers a call the oracle cancelled as
// [UnaryServerInterceptor] answers one the controller cancelled; the
// function that returns how many calls the oracle cancelled; and the one
// that uninstalls it. It is not to be installed beside [Install].
func InstallOracle(culprit func(context.Context) bool) (grpc.UnaryServerInterceptor, func() int, func()) {
	o := &oracle{holding: make(map[*culpritCall]int)}
	orc.Store(o)
	intercept := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !culprit(ctx) {
			return handler(ctx, req)
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		call := &culpritCall{cancel: cancel}
		resp, err := handler(context.WithValue(ctx, culpritKey{}, call), req)
		o.mu.Lock()
		cancelled := call.cancelled
		o.mu.Unlock()
		if err != nil && cancelled {
			return resp, status.Error(codes.ResourceExhausted, "etcdserver: request cancelled: server overloaded")
		}
		return resp, err
	}
	count := func() int {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.cancelled
	}
	return intercept, count, func() { orc.CompareAndSwap(o, nil) }
}

// hold records a read hold of the call in ctx, if it is a culprit's.
func (o *oracle) hold(ctx context.Context) *culpritCall {
	call, _ := ctx.Value(culpritKey{}).(*culpritCall)
	if call == nil {
		return nil
	}
	o.mu.Lock()
	o.holding[call]++
	o.mu.Unlock()
	return call
}

// release undoes hold.
func (o *oracle) release(call *culpritCall) {
	if call == nil {
		return
	}
	o.mu.Lock()
	if o.holding[call]--; o.holding[call] <= 0 {
		delete(o.holding, call)
	}
	o.mu.Unlock()
}

// writerWaits cancels every culprit holding the lock: a writer waits.
func (o *oracle) writerWaits() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for call := range o.holding {
		if !call.cancelled {
			call.cancelled = true
			o.cancelled++
			call.cancel(errOracle)
		}
	}
}
