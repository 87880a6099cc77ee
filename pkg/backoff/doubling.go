package backoff

import "time"

// Doubling is a wait that starts at Base and doubles with each attempt in a
// row, up to Max: Base, 2·Base, 4·Base and so on, never more than Max.
type Doubling struct {
	// Base is the first wait; it must be positive.
	Base time.Duration
	// Max caps every wait; it must be at least Base.
	Max time.Duration
}

// Wait returns the wait before the attempt that follows the n-th failure
// in a row: Base·2^(n−1), at most Max. An n below 1 counts as 1.
func (b Doubling) Wait(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}
