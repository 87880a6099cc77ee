// Package parallel runs the benchmarks' requests on a number of
// goroutines.
package parallel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Run runs fn for 0..n-1 on workers goroutines and returns how long
// that took. The first error stops the rest.
func Run(ctx context.Context, workers, n int, fn func(context.Context, int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), first
}
