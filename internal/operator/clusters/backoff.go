package clusters

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// Backoff computes retry delays from an object's own status rather than from
// memory, so that a restarted controller keeps backing off: the delay is as
// long as the object has been failing so far (its Ready condition has been
// False), clamped to [Min, Max]. Successive retries therefore wait Min, then
// Min again, 2·Min, 4·Min, … up to Max.
type Backoff struct {
	// Min is the first delay.
	Min time.Duration
	// Max bounds every delay.
	Max time.Duration
}

// After returns the delay before the next retry of an object that has been
// failing since since.
func (b Backoff) After(since, now time.Time) time.Duration {
	d := now.Sub(since)
	if d < b.Min {
		d = b.Min
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	return d
}

// ForConditions returns the delay for an object whose Ready condition is in
// conditions: measured from the condition's last transition when it is not
// True, else Min.
func (b Backoff) ForConditions(conditions []metav1.Condition, now time.Time) time.Duration {
	c := apimeta.FindStatusCondition(conditions, common.ConditionTypeReady)
	if c == nil || c.Status == metav1.ConditionTrue {
		return b.Min
	}
	return b.After(c.LastTransitionTime.Time, now)
}
