// Package detect holds moirai's overload detectors: small stateful
// functions of the controller's snapshots that say when the policies
// should look closely. They read only their inputs (the snapshots, in
// order, with the controller clock's times), so they are tested with
// scripted snapshots and no timing.
//
// # SLO
//
// [SLO] is Atropos's resource-overload signal (§3.3): the latency quantile
// of requests over a sliding window is above the objective while the
// throughput is flat or falling. Two details make it fire early enough to
// matter:
//
//   - The quantile counts the requests still running: a live request older
//     than the objective has already missed it. Requests stuck behind a
//     lock complete only when the lock is released; counting only
//     completions would see the overload when it is over.
//   - "Flat or falling" compares the completions of the newer half of the
//     window with the older half. Latency that rises with throughput is
//     load arriving faster, which admission control handles; latency that
//     rises while completions do not is work stuck on something.
//
// Objectives are per task: a request whose spec carries an objective of
// its own (task.Spec.Objective, as middleware sets it per route) is late
// past that objective, the others past the detector's. A task without an
// objective (task.NoObjective, or a Background task) is never counted: it
// is nobody's victim, and its length never makes the detector fire. The
// completions' histogram arrives already scaled to the controller's
// objective (see snapshot.Completions.Latency), so the detector reads it
// against its own target.
//
// A firing SLO detector only suspects resource overload. The policy
// confirms it by finding a contended resource (see package estimate); when
// it finds none the controller reports regular overload, which admission
// control handles (see moirai.WithRegularOverload).
//
// # Collapse
//
// [Collapse] is the throughput-collapse signal of the Atropos code: the
// completions of the last second fall below a fraction of the best second
// seen recently, while requests are waiting. It needs no objective, and it
// catches a service whose latency the objective would catch only late
// (a long objective, a few very slow requests).
//
// # Options
//
// [NewSLO] takes [SLOOption] values and [NewCollapse] [CollapseOption]
// values, made by the With functions. They set a configuration of the
// package's own, read once by the constructor; each one's doc says what a
// value out of its range does.
package detect
