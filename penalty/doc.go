// Package penalty is pBox's interference control (pBox, SOSP'23, §4.3–§4.4)
// as a moirai policy: it finds the task that defers others beyond their
// isolation goal on a shared resource and delays it, at a safe point, by an
// adaptive penalty.
//
// # Goals and non-goals
//
// Goal: keep every task within its isolation goal λ (task.Spec.MaxDeferral,
// default 0.5), the largest tolerated ratio of the time it is deferred by
// others to the time it runs, without dropping work. Non-goal: relieving
// overload. A resource held for seconds by one task is overload; penalties
// act only between acquisitions, so they cannot shorten a hold in
// progress. That is cancellation's job (package cancel); the two compose in
// one controller (see Precedence).
//
// # Interference level
//
// Per task: t_e, its execution time (time in activities, not counting
// penalties served), and t_d, its deferring time (time between WaitBegin
// and WaitEnd on any resource). Its interference level is
// t_f = t_d / (t_e − t_d) ([Interference]); a task deferred for its whole
// execution has t_f = +Inf.
//
// # Detection
//
// pBox detects on Release: for each waiter of the released resource whose
// t_f exceeds its goal, if the releasing task held the resource first, the
// releaser is noisy and the waiter its victim. Here detection reads the
// controller's snapshots instead, so that Release stays an atomic add and
// the policy stays a pure function: for each resource, each waiter whose
// t_f exceeds its goal (or, the history check, whose average t_f over the
// snapshots seen is within 10 % of the goal and whose current one is too)
// and who has waited at least 2 ms makes each holder that has held the
// resource longer than the waiter has waited ("held it first") noisy,
// unless both are of the same class: requests of one kind queued for a
// resource are a queue of equals, not one activity interfering with
// another; nor when the tasks of the waiter's class have been seen
// holding that resource longer than those of the holder's, on a moving
// average over the snapshots (a heavy request waiting for a worker slot
// that a light request holds is not that light request's victim). A
// holder is noisy even if
// it waited itself before it took the
// resource (the requests of a noisy stream queue behind one another). A
// holder that itself waits for another resource is a
// link of a chain, not noisy: detection follows its wait, up to four
// links and 32 holders per victim (the longest holders first, so that a
// step's work stays bounded with thousands of holders), to the holders
// there (a request holding a worker slot while it
// waits for the table lock is not the one to penalize; the scan holding
// the lock is). The policy is [policy.Continuous]: it runs on every step of the
// loop, detector or not, and asks for the fine tick while it sees a
// victim or a pending penalty.
//
// # Adaptive length
//
// The first penalty of a noisy task is p1 = sqrt(t_d(victim) · t_e(noisy))
// − t_e(noisy), at least 1 ms. Each later detection adapts it: when the
// victim's deferring time beyond its goal dwarfs the penalty (more than
// [Delta] times it), the gap-based policy p' = p · gap/δ; otherwise the
// score-based policy p' = p · (1 + score/α), α = [Alpha], with score the
// victim's t_f over its goal minus one (0 to α). [WithMaxPenalty] caps
// every length. Without it, a length is capped at 100 ms, or, when longer,
// at how long the noisy class's requests are held back in front of the
// resource: over its tasks that ended (moving averages), the penalties
// they served plus their waits for the resource, less half of one of their
// holds (1/2c of one for a queue of capacity c). A stream of requests
// taking a lock back to back queues behind itself; a penalty that long
// moves that wait from the lock's queue, where victims wait behind it,
// into the penalty, where they do not.
//
// # Slowdown budget
//
// A penalty slows the stream it throttles. Once a class has been
// penalized on a lock or a queue and followed for 8 snapshots, its cap is
// instead the one that keeps its requests within β times their
// uncontrolled latency L0 (β = [DefaultMaxSlowdown], 1.3;
// [WithMaxSlowdown]): cap = (β·L0 − h − w)/max(f, ½), with h and w its
// requests' hold of the resource and wait for it, and f the share of them
// that served a penalty (moving averages over the class's tasks that
// ended; a task's last sighting counts half a snapshot window more of
// what it was doing). L0 comes from what penalties do not change: n
// requests of the class live at once (a client's connections), each
// holding for h, on c slots of which the other classes hold a share ρ,
// queue for n·h/(c·(1−ρ)) (n and ρ moving averages over the snapshots);
// a stream that does not queue behind itself takes h + w. The cap moves
// only when the budget changes by more than 20 %, so that the penalties'
// own noise does not move it. When two tasks of the class have held a
// lock at once (readers of a shared lock), the queue model does not hold
// and the budget only cuts the cap above. A class is forgotten after 256
// snapshots without a live task; at most 1,024 are followed.
//
// task.MaxPenalty (1 s) bounds every penalty. A new task of a class
// starts from the length the class reached, so repeated noisy requests
// converge too; [Policy.Stats] reports the adaptations before each
// class's length stopped changing by 5 %.
//
// # Streams of requests
//
// pBox keeps a penalty on the noisy pBox, which outlives one activity: a
// connection's next statement serves what its last one earned. A request
// here is a task of its own that often takes its resource once, so the
// penalty it earns while holding is still pending when it ends. The
// registry passes such a penalty to the next task of the same class to
// begin (within task.CarryFor, at most 16 waiting per class), which serves
// it at its first acquisition, before it holds anything. A noisy stream
// (a report run over and over, a bulk client's statements) is thus held
// back request by request, each time its requests were seen deferring
// others.
//
// # Safe points
//
// The controller acts on a decision by penalizing the task, which sets a
// flag in the task's state word and the pending length. The instrumented
// primitives already load that word on every acquisition to see whether
// the task was cancelled; one test covers both, so an unpenalized task
// pays nothing. A flagged task serves its penalty (task.Task.Pause) before
// it acquires, and only if it holds no instrumented resource: never while
// holding what its victims need. Code on its own goroutine may also call
// Pause at an activity boundary. A task served by a shared goroutine (an
// event loop, a worker pool) must not sleep the worker: the worker calls
// task.Task.TakePenalty before the task's next activity and requeues the
// task for the returned time (pBox's unbind mode). Penalty time is not
// waiting time and not execution time: it never counts as interference,
// the noisy task's or anyone's, so penalties do not cascade.
//
// # Precedence
//
// With cancellation in the same controller (moirai.New's defaults):
// penalties run on every step, cancellation only while an overload
// detector fires; a penalized task remains a cancellation candidate; a
// cancellation drops the task's pending penalty, and a cancelled task is
// never penalized; a penalty counts as no action when the controller
// decides whether the overload was confirmed as resource overload.
//
// # Usage
//
//	ctl := moirai.New()                                  // penalties and cancellation (the defaults)
//	ctl := moirai.New(moirai.WithPolicy(penalty.New())) // penalties only
//
// # Options
//
// [New] takes [Option] values, made by [WithMaxPenalty], [WithMaxSlowdown]
// and [WithMinPenalty]. They set a configuration of the package's own, read
// once by New; each one's doc says what a value out of its range does.
package penalty
