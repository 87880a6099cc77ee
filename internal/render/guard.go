package render

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrTimeLimit is wrapped by the error of a render that ran out of time.
var ErrTimeLimit = errors.New("template exceeded its time limit")

// ErrSizeLimit is wrapped by the error of a render whose output, or whose
// intermediate values, grew beyond the limits.
var ErrSizeLimit = errors.New("template exceeded its size limit")

// guard bounds one execution of a template. The executing goroutine calls
// check, admit and charge from every template function and output write; the
// renderer stops it from outside with stop. A guard is reused for later
// executions only when its execution finished in time.
type guard struct {
	stopped  atomic.Pointer[error]
	maxValue int64 // largest single value or output
	maxWork  int64 // bytes of function results a render may use
	budget   int64 // remaining bytes of function results; executing goroutine only
}

func (g *guard) reset(l Limits) {
	g.stopped.Store(nil)
	g.maxValue = l.MaxOutputBytes
	g.maxWork = l.MaxWorkBytes
	g.budget = l.MaxWorkBytes
}

// stop makes every later check fail with err.
func (g *guard) stop(err error) { g.stopped.CompareAndSwap(nil, &err) }

func (g *guard) check() error {
	if p := g.stopped.Load(); p != nil {
		return *p
	}
	return nil
}

// admit refuses a call of fn whose result would be size bytes large.
func (g *guard) admit(fn string, size int64) error {
	if size > g.maxValue || size > g.budget {
		return fmt.Errorf("%s would produce about %d bytes: %w", fn, size, ErrSizeLimit)
	}
	return nil
}

// charge takes size bytes, the result of fn, off the budget.
func (g *guard) charge(fn string, size int64) error {
	if size > g.maxValue {
		return fmt.Errorf("%s produced %d bytes, more than the %d bytes a value may have: %w", fn, size, g.maxValue, ErrSizeLimit)
	}
	g.budget -= size
	if g.budget < 0 {
		return fmt.Errorf("template functions produced more than the %d bytes a render may use: %w", g.maxWork, ErrSizeLimit)
	}
	return nil
}

// output collects the text of one execution, up to the output limit.
type output struct {
	bytes.Buffer
	g   *guard
	max int64
}

// Write implements io.Writer; an error stops the execution.
func (o *output) Write(p []byte) (int, error) {
	if err := o.g.check(); err != nil {
		return 0, err
	}
	if int64(o.Len()+len(p)) > o.max {
		return 0, fmt.Errorf("output is larger than %d bytes: %w", o.max, ErrSizeLimit)
	}
	return o.Buffer.Write(p)
}
