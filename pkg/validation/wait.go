package validation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pollInterval is how often a wait looks again.
const pollInterval = 250 * time.Millisecond

// lookTimeout bounds one look of a wait; the wait's own timeout bounds
// them all.
const lookTimeout = 15 * time.Second

// maxEvents is how many events of an object a failure carries.
const maxEvents = 10

// stepFailure is the error of a failed step with its evidence.
type stepFailure struct {
	msg     string
	failure *Failure
}

func (e *stepFailure) Error() string { return e.msg }

// failf returns a step failure with evidence f (which may be nil).
func failf(f *Failure, format string, args ...any) error {
	return &stepFailure{msg: fmt.Sprintf(format, args...), failure: f}
}

// errStop ends a wait at once: what it waits for cannot happen any more.
var errStop = errors.New("stopped")

// waitUntil polls cond every pollInterval until it reports done or timeout
// passes. cond returns what it saw (for the message on timeout) and an
// error to end the wait at once (a failure that waiting cannot mend). A
// transient error it folds into what it saw. The error on timeout says how
// long it waited and what it saw last.
func waitUntil(ctx context.Context, timeout time.Duration, cond func(context.Context) (done bool, seen string, err error)) error {
	begin := time.Now()
	parent := ctx
	var seen string
	var stop error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		// A look runs on the caller's context, not on the step's
		// deadline: a client refuses a request whose rate-limit wait
		// would pass the deadline, and that refusal would then stand in
		// for what the last look saw.
		look, cancel := context.WithTimeout(parent, lookTimeout)
		done, s, err := cond(look)
		cancel()
		if ctx.Err() == nil || seen == "" {
			// What a look cut short by the deadline saw is its error,
			// not the state.
			seen = s
		}
		if err != nil {
			stop = err
			return false, errStop
		}
		return done, nil
	})
	switch {
	case err == nil:
		return nil
	case stop != nil:
		return stop
	}
	why := fmt.Sprintf("not done after %s", time.Since(begin).Round(100*time.Millisecond))
	if errors.Is(ctx.Err(), context.Canceled) {
		why = "interrupted"
	}
	if seen == "" {
		seen = "nothing"
	}
	return fmt.Errorf("%s; last seen: %s", why, seen)
}

// conditionsOf reads status.conditions of an unstructured object.
func conditionsOf(obj *unstructured.Unstructured) []metav1.Condition {
	if obj == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	out := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		c := metav1.Condition{Type: str("type"), Status: metav1.ConditionStatus(str("status")), Reason: str("reason"), Message: str("message")}
		if g, ok := m["observedGeneration"].(int64); ok {
			c.ObservedGeneration = g
		}
		out = append(out, c)
	}
	return out
}

// findCondition returns the condition typ of conds, or nil.
func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// describeConditions renders conditions as "Type=Status Reason: message; ...".
func describeConditions(conds []metav1.Condition) string {
	if len(conds) == 0 {
		return "no conditions"
	}
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		s := fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
		if c.Message != "" {
			s += ": " + c.Message
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// objectName names obj for messages: "Kind namespace/name" or "Kind name".
func objectName(obj client.Object, kind string) string {
	if obj.GetNamespace() != "" {
		return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}

// eventsOf returns the last maxEvents events about the object kind/name (in
// namespace, or any namespace for a cluster-scoped object), oldest first,
// as "Type Reason: message". Events that cannot be listed are one line
// saying so.
func eventsOf(ctx context.Context, c client.Client, kind, namespace, name string) []string {
	list := &corev1.EventList{}
	opts := []client.ListOption{client.MatchingFields{"involvedObject.kind": kind, "involvedObject.name": name}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return []string{"(events cannot be listed: " + err.Error() + ")"}
	}
	when := func(e *corev1.Event) time.Time {
		switch {
		case !e.LastTimestamp.IsZero():
			return e.LastTimestamp.Time
		case !e.EventTime.IsZero():
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool { return when(&items[i]).Before(when(&items[j])) })
	if len(items) > maxEvents {
		items = items[len(items)-maxEvents:]
	}
	out := make([]string, 0, len(items))
	for i := range items {
		e := &items[i]
		line := fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message)
		if e.Count > 1 {
			line += fmt.Sprintf(" (x%d)", e.Count)
		}
		out = append(out, line)
	}
	return out
}

// tailFile returns the last n lines of the file at path; ok is false when
// it cannot be read.
func tailFile(path string, n int) (LogTail, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return LogTail{}, false
	}
	text := strings.TrimRight(string(data), "\n")
	var lines []string
	if text != "" {
		lines = strings.Split(text, "\n")
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return LogTail{Name: path, Lines: lines}, true
}

// tailLines returns the last n lines of s.
func tailLines(s string, n int) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// providerLogs returns the tails of the provider's logs below dir (the
// process deployer's directory of the provider): the init log, and with
// run the run logs as well.
func providerLogs(dir string, n int, run bool) []LogTail {
	var out []LogTail
	if t, ok := tailFile(filepath.Join(dir, "init.log"), n); ok {
		out = append(out, t)
	}
	if run {
		logs, _ := filepath.Glob(filepath.Join(dir, "run-*.log"))
		slices.Sort(logs)
		for _, l := range logs {
			if t, ok := tailFile(l, n); ok {
				out = append(out, t)
			}
		}
	}
	return out
}
