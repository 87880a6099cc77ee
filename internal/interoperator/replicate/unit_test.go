package replicate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func TestUnreachable(t *testing.T) {
	gr := schema.GroupResource{Group: "osb.servicefabrik.io", Resource: "sfserviceinstances"}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := map[string]struct {
		reason string
		err    error
		want   bool
	}{
		"Nil":               {reason: "No error is no outage.", err: nil, want: false},
		"ConnectionRefused": {reason: "client-go wraps a refused connection in a url.Error.", err: fmt.Errorf("get the replica: %w", refused), want: true},
		"Deadline":          {reason: "A request that timed out on the client.", err: context.DeadlineExceeded, want: true},
		"Unavailable":       {reason: "The API server says it cannot serve now.", err: apierrors.NewServiceUnavailable("starting"), want: true},
		"ServerTimeout":     {reason: "The API server timed out.", err: apierrors.NewServerTimeout(gr, "get", 1), want: true},
		"NotFound":          {reason: "An answer about the request is not an outage.", err: apierrors.NewNotFound(gr, "x"), want: false},
		"Forbidden":         {reason: "Refused credentials are not an outage.", err: apierrors.NewForbidden(gr, "x", errors.New("no")), want: false},
		"Other":             {reason: "A plain error says nothing about the network.", err: errors.New("boom"), want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Unreachable(tc.err); got != tc.want {
				t.Errorf("%s\nUnreachable(%v) = %v, want %v", tc.reason, tc.err, got, tc.want)
			}
		})
	}
}

func TestProcessed(t *testing.T) {
	tests := map[string]struct {
		reason               string
		observed, generation int64
		state                osbv1alpha1.State
		want                 bool
	}{
		"NotLookedAt":   {reason: "A new replica has no status.", observed: 0, generation: 1, state: "", want: false},
		"OldGeneration": {reason: "The status is of the previous spec.", observed: 1, generation: 2, state: osbv1alpha1.StateSucceeded, want: false},
		"Queued":        {reason: "A restarted operation is not started yet.", observed: 2, generation: 2, state: osbv1alpha1.StateInQueue, want: false},
		"InProgress":    {reason: "The sister works on the current spec.", observed: 2, generation: 2, state: osbv1alpha1.StateInProgress, want: true},
		"Failed":        {reason: "The sister finished the current spec.", observed: 2, generation: 2, state: osbv1alpha1.StateFailed, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := processed(tc.observed, tc.generation, tc.state); got != tc.want {
				t.Errorf("%s\nprocessed(%d, %d, %q) = %v, want %v", tc.reason, tc.observed, tc.generation, tc.state, got, tc.want)
			}
		})
	}
}
