// Package waitq is the intrusive FIFO of waiters under moirai's primitives
// (resource's mutexes and semaphores, fence's paths): a doubly-linked list
// whose links live in the waiters themselves, so that queueing allocates
// nothing and a waiter that gives up leaves from the middle in O(1).
//
// A waiter type embeds [Links] and returns them from its WaitLinks method;
// [Queue] is not safe for concurrent use: its owner guards it with a lock.
package waitq

// Links are a waiter's place in a [Queue]. The zero value is a waiter in
// no queue.
type Links[T any] struct {
	prev, next *T
	queued     bool
}

// Queued reports whether the waiter is in a queue.
func (l *Links[T]) Queued() bool { return l.queued }

// Linked is the constraint on a queue's waiters: a pointer to T that
// returns T's links.
type Linked[T any] interface {
	*T
	WaitLinks() *Links[T]
}

// Queue is an intrusive FIFO of *T. The zero value is an empty queue.
type Queue[T any, P Linked[T]] struct {
	head, tail *T
	n          int
}

// Front returns the first waiter, or nil if the queue is empty.
func (q *Queue[T, P]) Front() *T { return q.head }

// Next returns the waiter after w, or nil if w is the last.
func (q *Queue[T, P]) Next(w *T) *T { return P(w).WaitLinks().next }

// Len returns the number of waiters queued.
func (q *Queue[T, P]) Len() int { return q.n }

// PushBack queues w, which must be in no queue, at the back.
func (q *Queue[T, P]) PushBack(w *T) { q.insert(w, q.tail, nil) }

// PushFront queues w, which must be in no queue, at the front.
func (q *Queue[T, P]) PushFront(w *T) { q.insert(w, nil, q.head) }

// insert queues w, which must be in no queue, between prev and next,
// neighbours in the queue (nil at its ends).
func (q *Queue[T, P]) insert(w, prev, next *T) {
	l := P(w).WaitLinks()
	l.prev, l.next = prev, next
	if prev != nil {
		P(prev).WaitLinks().next = w
	} else {
		q.head = w
	}
	if next != nil {
		P(next).WaitLinks().prev = w
	} else {
		q.tail = w
	}
	l.queued = true
	q.n++
}

// Remove takes w out of the queue; it does nothing if w is in no queue.
func (q *Queue[T, P]) Remove(w *T) {
	l := P(w).WaitLinks()
	if !l.queued {
		return
	}
	if l.prev != nil {
		P(l.prev).WaitLinks().next = l.next
	} else {
		q.head = l.next
	}
	if l.next != nil {
		P(l.next).WaitLinks().prev = l.prev
	} else {
		q.tail = l.prev
	}
	l.prev, l.next, l.queued = nil, nil, false
	q.n--
}
