package spruntime

import (
	"math/rand/v2"
	"time"
)

// pollInterval is how long to wait before the next drift check of an object
// with these annotations under cfg: the annotation wins over the
// ProviderConfig, which wins over the default; the result is at least
// floor. A bad annotation is reported in err, and the interval is then
// chosen as if it were absent.
func pollInterval(annotations map[string]string, cfg Config, def, floor time.Duration) (d time.Duration, err error) {
	d, err = annotatedPollInterval(annotations)
	if d <= 0 {
		d = configPollInterval(cfg)
	}
	if d <= 0 {
		d = def
	}
	if d < floor {
		d = floor
	}
	return d, err
}

// configPollInterval calls cfg.PollInterval, which is the provider author's
// code: a nil config, or a method that dereferences an unset pointer (as
// openMCP's template did), gives zero (the default) instead of a panic.
func configPollInterval(cfg Config) (d time.Duration) {
	if cfg == nil {
		return 0
	}
	defer func() {
		if r := recover(); r != nil {
			d = 0
		}
	}()
	return cfg.PollInterval()
}

// jitter varies d at random by up to ±fraction of it. fraction is clamped
// to [0, 1); the result is always positive for a positive d.
func jitter(d time.Duration, fraction float64, rnd func() float64) time.Duration {
	if d <= 0 || fraction <= 0 {
		return d
	}
	if fraction >= 1 {
		fraction = 0.99
	}
	// rnd() is in [0, 1); scale it to [-fraction, +fraction).
	delta := (rnd()*2 - 1) * fraction * float64(d)
	return d + time.Duration(delta)
}

// randFloat is the source of jitter.
var randFloat = rand.Float64
