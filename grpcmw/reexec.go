package grpcmw

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The re-execution of a gRPC call is its client's retry policy's (gRFC
// A6), which retries UNAVAILABLE after the pushback the server's trailer
// gives. The server interceptors keep its effects exactly-once by
// default:
//
//   - A cancelled call tells the retry policy to retry it (pushback: its
//     class's expected wait) only when it is safe to run twice: its method
//     is declared idempotent (option idempotency_level = IDEMPOTENT or
//     NO_SIDE_EFFECTS in its .proto, read from the registered
//     descriptors), or its class opts in ([WithReexecutable]). Any other
//     cancelled call's pushback is -1: not retried.
//   - A call that completed keeps its answer: a handler that returns a
//     response after its context was cancelled is answered with it. One
//     that returns an error then is answered UNAVAILABLE (or with the
//     culprit answer of its tree), retried only when safe, as above.

// WithReexecutable marks the calls of the given classes (see [WithClass];
// by default the full method name, "/pkg.Service/Method"), or every call
// when no class is given, as safe to run twice whatever their method's
// declared idempotency: a cancelled one asks its client's retry policy
// to retry it after its expected wait. Use it for a handler whose work is
// one transaction (a cancelled transaction rolled back).
func WithReexecutable(classes ...string) Option {
	return func(c *config) { c.SetReexecutable(classes) }
}

// reexecutable reports whether a call of method and class is safe to run
// twice.
func (c *config) reexecutable(method, class string) bool {
	return c.SafeTwice.Has(class) || idempotent(method)
}

// idempotent reports whether the registered descriptor of method
// ("/pkg.Service/Method") declares it idempotent.
func idempotent(method string) bool {
	name := strings.Replace(strings.TrimPrefix(method, "/"), "/", ".", 1)
	if !protoreflect.FullName(name).IsValid() {
		return false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		return false
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return false
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok || opts == nil {
		return false
	}
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_IDEMPOTENT, descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
		return true
	}
	return false
}
