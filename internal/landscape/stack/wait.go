package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// pollInterval is how often a wait looks again.
const pollInterval = 250 * time.Millisecond

// errFailed marks a wait that ended early because what it waited for
// cannot happen any more (a provider process exited, init failed).
var errFailed = errors.New("failed")

// waitFor polls cond until it holds or timeout passes. The error names what
// it waited for and, on timeout, what was seen last: describe's account of
// the object (its conditions, the tail of its process's log) and the last
// error cond returned. cond returns a non-nil error to stop waiting at
// once; a transient problem it records with noteErr (or describes) and
// returns (false, nil).
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error), describe func() string) error {
	begin := time.Now()
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, cond)
	if err == nil {
		return nil
	}
	if !wait.Interrupted(err) {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	// The step's context may end before timeout (the landscape's
	// --start-timeout bounds each step): say how long it was.
	why := fmt.Sprintf("not done after %s", time.Since(begin).Round(time.Second))
	if errors.Is(ctx.Err(), context.Canceled) {
		why = "interrupted"
	}
	var seen string
	if describe != nil {
		seen = describe()
	}
	if seen == "" {
		seen = "nothing"
	}
	return fmt.Errorf("waiting for %s: %s; last seen: %s", what, why, seen)
}

// lastError remembers the last transient error of a wait, for its message.
type lastError struct{ err error }

// note records err (when not nil) and returns false, nil: keep waiting.
func (l *lastError) note(err error) (bool, error) {
	if err != nil {
		l.err = err
	}
	return false, nil
}

func (l *lastError) String() string {
	if l.err == nil {
		return ""
	}
	return "last error: " + l.err.Error()
}

// joinSeen joins the non-empty parts of a "last seen" account.
func joinSeen(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), "; ")
}

// describeConditions renders conditions as "Type=Status Reason: message".
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
	return "conditions " + strings.Join(parts, "; ")
}

// waitCRDEstablished waits until the CRD named name exists on c and is
// Established (served): a CRD that merely exists may not be served yet,
// and objects of its kind then fail with "no matches for kind". While it
// waits, check may end the wait (a provider that should install the CRD
// failed).
func waitCRDEstablished(ctx context.Context, c client.Client, timeout time.Duration, name, installedBy string, check func(context.Context) error) error {
	var last lastError
	crd := &apiextensionsv1.CustomResourceDefinition{}
	found := false
	return waitFor(ctx, timeout, fmt.Sprintf("CRD %s (installed by %s) Established", name, installedBy), func(ctx context.Context) (bool, error) {
		if check != nil {
			if err := check(ctx); err != nil {
				return false, err
			}
		}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			found = false
			return last.note(client.IgnoreNotFound(err))
		}
		found = true
		return crdinstall.Established(crd), nil
	}, func() string {
		if !found {
			return joinSeen("the CRD does not exist", last.String())
		}
		return joinSeen(crdConditions(crd), last.String())
	})
}

// crdConditions renders a CRD's conditions.
func crdConditions(crd *apiextensionsv1.CustomResourceDefinition) string {
	conds := make([]metav1.Condition, 0, len(crd.Status.Conditions))
	for _, c := range crd.Status.Conditions {
		conds = append(conds, metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return describeConditions(conds)
}

// providerKinds are the kinds the operator deploys through init and run;
// the landscape waits for them to be Ready.
var providerKinds = []string{"ServiceProvider", "ClusterProvider", "PlatformService"}

// isProviderKind reports whether gvk is one of providerKinds.
func isProviderKind(gvk schema.GroupVersionKind) bool {
	return gvk.Group == providerv1alpha1.GroupVersion.Group && slices.Contains(providerKinds, gvk.Kind)
}

// providerWatch follows a provider object (ServiceProvider, ClusterProvider
// or PlatformService) on the platform cluster, for waits: whether it is
// Ready, whether it failed, and what to say about it.
type providerWatch struct {
	l    *landscape.Landscape
	kind string
	name string

	obj  *unstructured.Unstructured
	last lastError
}

func newProviderWatch(l *landscape.Landscape, kind, name string) *providerWatch {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(providerv1alpha1.GroupVersion.WithKind(kind))
	obj.SetName(name)
	return &providerWatch{l: l, kind: kind, name: name, obj: obj}
}

// String names the provider, e.g. "ServiceProvider sample".
func (p *providerWatch) String() string { return p.kind + " " + p.name }

// dir is the process deployer's directory of the provider (its logs).
func (p *providerWatch) dir() string {
	return filepath.Join(p.l.OperatorStateDir(), strings.ToLower(p.kind)+"-"+p.name)
}

// conditions reads the object's status conditions as last fetched.
func (p *providerWatch) conditions() []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(p.obj.Object, "status", "conditions")
	var out []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out = append(out, metav1.Condition{Type: str("type"), Status: metav1.ConditionStatus(str("status")), Reason: str("reason"), Message: str("message")})
	}
	return out
}

// ready fetches the object and reports whether it is Ready. It returns an
// error wrapping errFailed when the provider cannot become Ready without
// a change: its init failed, or a run process exited (for example because
// it could not bind its port). Both happen in seconds, and waiting minutes
// for a process that keeps exiting would only hide the cause.
func (p *providerWatch) ready(ctx context.Context) (bool, error) {
	if err := p.l.Platform.Client.Get(ctx, client.ObjectKeyFromObject(p.obj), p.obj); err != nil {
		return p.last.note(fmt.Errorf("get %s: %w", p, err))
	}
	conds := p.conditions()
	if c := apimeta.FindStatusCondition(conds, string(providerv1alpha1.ConditionInitialized)); c != nil && c.Reason == string(providerv1alpha1.ReasonInitFailed) {
		return false, fmt.Errorf("%s %w: its init failed: %s%s", p, errFailed, c.Message, logTail(filepath.Join(p.dir(), "init.log")))
	}
	c := apimeta.FindStatusCondition(conds, string(providerv1alpha1.ConditionReady))
	if c == nil {
		return false, nil
	}
	if c.Status == metav1.ConditionTrue {
		return true, nil
	}
	if c.Reason == string(providerv1alpha1.ReasonProviderCrashing) {
		return false, fmt.Errorf("%s %w: a run process exited: %s%s", p, errFailed, c.Message, p.runLogTails())
	}
	return false, nil
}

// runLogTails returns the last lines of the provider's run logs.
func (p *providerWatch) runLogTails() string {
	logs, _ := filepath.Glob(filepath.Join(p.dir(), "run-*.log"))
	var b strings.Builder
	for _, log := range logs {
		b.WriteString(logTail(log))
	}
	return b.String()
}

// logTail returns "\nlast lines of <path>:\n<lines>", or nothing when
// there is no such log (the process never started).
func logTail(path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return fmt.Sprintf("\nlast lines of %s:\n%s", path, supervisor.LogTail(path, 10))
}

// describe says what was seen of the provider last: its conditions, the
// last error getting it, and the tails of its logs.
func (p *providerWatch) describe() string {
	tails := p.runLogTails()
	if tails == "" {
		tails = logTail(filepath.Join(p.dir(), "init.log"))
	}
	return joinSeen(p.String()+" "+describeConditions(p.conditions()), p.last.String()) + tails
}

// waitReady waits until the provider is Ready, failing fast when it
// failed (see ready).
func (p *providerWatch) waitReady(ctx context.Context, timeout time.Duration) error {
	return waitFor(ctx, timeout, p.String()+" Ready", p.ready, p.describe)
}

// failed returns the provider's failure when it has one, else nil; a
// transient error reading it is not a failure.
func (p *providerWatch) failed(ctx context.Context) error {
	if _, err := p.ready(ctx); errors.Is(err, errFailed) {
		return err
	}
	return nil
}

// waitServing waits until GET url (prepared by prepare, e.g. with basic
// auth) answers 200, failing at once with proc's exit when the process that
// should serve it exited (say, its port was taken), and naming the last
// answer and the tail of proc's log at the timeout.
func waitServing(ctx context.Context, timeout time.Duration, what, url string, proc *controlplane.Proc, prepare func(*http.Request)) error {
	var last lastError
	return waitFor(ctx, timeout, what+" at "+url, func(ctx context.Context) (bool, error) {
		if proc.Exited() {
			return false, proc.ExitError()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		if prepare != nil {
			prepare(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return last.note(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return last.note(fmt.Errorf("GET %s: %s", req.URL.Path, resp.Status))
		}
		return true, nil
	}, func() string {
		return joinSeen(last.String(), fmt.Sprintf("last lines of %s:\n%s", proc.Record.Log, supervisor.LogTail(proc.Record.Log, 10)))
	})
}
