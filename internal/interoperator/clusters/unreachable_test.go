package clusters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
		"CutMidRequest":     {reason: "A connection closed mid-request ends in an unexpected EOF.", err: fmt.Errorf("apply: %w", io.ErrUnexpectedEOF), want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Unreachable(tc.err); got != tc.want {
				t.Errorf("%s\nUnreachable(%v) = %v, want %v", tc.reason, tc.err, got, tc.want)
			}
		})
	}
}
