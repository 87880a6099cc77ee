package providertest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// errPollTimeout says that a poll ran out of time before it saw an error.
var errPollTimeout = errors.New("timed out")

// pollInterval is how often the landscape's waits check.
const pollInterval = 200 * time.Millisecond

// poll calls check until it returns nil or ctx ends; the error then is the
// last one check returned, so that it says what was missing.
func poll(ctx context.Context, check func(context.Context) error) error {
	last := errPollTimeout
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		// Each check gets its own deadline, so that a hanging call does
		// not eat the whole wait.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		last = check(cctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w (after waiting: %w)", last, err)
	}
	return nil
}
