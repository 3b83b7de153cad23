package taskx

// stateDownstream marks a task one of whose calls to another service was
// admitted there (see [Task.MarkAdmittedDownstream]).
const stateDownstream = 1 << 6

// MarkAdmittedDownstream records that a service this task called admitted
// the call. Client middleware calls it when a call's response comes back
// admitted (httpmw's and grpcmw's client sides do), so that the task's later calls
// go out as continuations: a server under DAGOR admission lets a
// continuation through at the level it had before its last cut, for a
// grace period, so that a level that falls in the middle of a task does
// not waste the calls the task already made (admit.DAGOR.AdmitContinuation).
// It does nothing on a nil task.
func (t *Task) MarkAdmittedDownstream() {
	if t != nil && t.state.Load()&stateDownstream == 0 {
		t.state.Or(stateDownstream)
	}
}

// AdmittedDownstream reports whether [Task.MarkAdmittedDownstream] was
// called on t. Client middleware calls it when it sends a call, to mark
// the call as a continuation.
func (t *Task) AdmittedDownstream() bool {
	return t != nil && t.state.Load()&stateDownstream != 0
}
