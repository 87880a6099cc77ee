package landscaperun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/landscape/stack"
)

// ProvisionViaBroker orders the instances ids of plan "small" through the
// landscape's OSB broker, workers at once, as an OSB platform does: PUT
// with accepts_incomplete=true, repeated (the same request, which the
// broker answers idempotently) while the broker does not answer or answers
// 5xx, until it answers 200, 201 or 202. It does not wait for the
// provisioning itself: CountIDs does. answered, when not nil, counts the
// PUTs the broker has accepted.
func (l *Landscape) ProvisionViaBroker(ctx context.Context, ids []string, workers int, answered *atomic.Int64) error {
	raw, err := os.ReadFile(filepath.Join(l.Dir, stack.BrokerCredentialsFile))
	if err != nil {
		return fmt.Errorf("the broker's credentials: %w", err)
	}
	var info stack.BrokerInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return fmt.Errorf("the broker's credentials: %w", err)
	}
	return forEach(ids, workers, func(id string) error {
		err := provisionOne(ctx, info, id)
		if err == nil && answered != nil {
			answered.Add(1)
		}
		return err
	})
}

// brokerRetryFor bounds how long one PUT is repeated: longer than a killed
// broker or API server takes to come back.
const brokerRetryFor = 2 * time.Minute

func provisionOne(ctx context.Context, info stack.BrokerInfo, id string) error {
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"bench-org","space_guid":"bench-space"}`, ServiceID, PlanID)
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, brokerRetryFor, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, info.URL+"/v2/service_instances/"+id+"?accepts_incomplete=true", strings.NewReader(body))
		if err != nil {
			return false, err
		}
		req.SetBasicAuth(info.Username, info.Password)
		req.Header.Set("X-Broker-API-Version", "2.17")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil // the broker is down: ask again
		}
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusAccepted:
			return true, nil
		case resp.StatusCode >= 500:
			last = fmt.Sprintf("%s: %s", resp.Status, answer)
			return false, nil
		}
		return false, fmt.Errorf("PUT instance %s: %s: %s", id, resp.Status, answer)
	})
	if err != nil && last != "" {
		return fmt.Errorf("PUT instance %s: %w; last answer: %s", id, err, last)
	}
	return err
}

// CountIDs returns how many of the instances ids, stored where the broker
// stores them, succeeded and failed.
func (l *Landscape) CountIDs(ctx context.Context, ids []string) (succeeded, failed int, err error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[sf.InstanceKey(id).String()] = true
	}
	list := &osbv1alpha1.SFServiceInstanceList{}
	if err := l.Onboarding.List(ctx, list); err != nil {
		return 0, 0, fmt.Errorf("list instances: %w", err)
	}
	for i := range list.Items {
		inst := &list.Items[i]
		if !want[inst.Namespace+"/"+inst.Name] {
			continue
		}
		switch inst.Status.State {
		case osbv1alpha1.StateSucceeded:
			succeeded++
		case osbv1alpha1.StateFailed:
			failed++
		}
	}
	return succeeded, failed, nil
}
