// Package ahead owns a value made in the background, ahead of its use,
// and handed over once: what a supervisor's start makes on the other core
// while it does the rest (a standalone run's session slot, its nested
// sessions' socket). The one who takes it owns it; what nobody took is
// closed by Close.
package ahead

import "sync"

// Value is a value of T being made, or made.
type Value[T any] struct {
	made chan struct{}
	// v and err are build's, set before made is closed.
	v   T
	err error
	// drop closes a value nobody took.
	drop func(T)

	mu    sync.Mutex
	taken bool
}

// Start starts build in the background; drop closes what it built when
// it is never taken (Close).
func Start[T any](build func() (T, error), drop func(T)) *Value[T] {
	a := &Value[T]{made: make(chan struct{}), drop: drop}
	go func() {
		defer close(a.made)
		a.v, a.err = build()
	}()
	return a
}

// Take waits for the value and hands it over, with build's error, the
// first time; ok is false once it was taken or closed.
func (a *Value[T]) Take() (v T, err error, ok bool) {
	<-a.made
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.taken {
		return v, nil, false
	}
	a.taken = true
	return a.v, a.err, true
}

// Peek waits for the value and returns it without taking it, for tests
// that look at what was made.
func (a *Value[T]) Peek() (T, error) {
	<-a.made
	return a.v, a.err
}

// Close closes the value unless it was taken (build failed: nothing to
// close).
func (a *Value[T]) Close() {
	if v, err, ok := a.Take(); ok && err == nil {
		a.drop(v)
	}
}
