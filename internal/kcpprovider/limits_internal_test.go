package kcpprovider

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// TestNoClientSideLimit: the kcp client is not held to client-go's default
// 5 requests/s, unless the config given sets a limit of its own.
func TestNoClientSideLimit(t *testing.T) {
	r := New(nil, &rest.Config{Host: "https://127.0.0.1:1/clusters/root"}, "kcp")
	if r.kcp.QPS >= 0 {
		t.Errorf("kcp client QPS %v, want negative (no client-side limit)", r.kcp.QPS)
	}
	r = New(nil, &rest.Config{Host: "https://127.0.0.1:1/clusters/root", QPS: 50, Burst: 100}, "kcp")
	if r.kcp.QPS != 50 || r.kcp.Burst != 100 {
		t.Errorf("kcp client QPS %v burst %d, want the given 50 and 100", r.kcp.QPS, r.kcp.Burst)
	}
	limiter := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	r = New(nil, &rest.Config{Host: "https://127.0.0.1:1/clusters/root", RateLimiter: limiter}, "kcp")
	if r.kcp.QPS != 0 || r.kcp.RateLimiter != limiter {
		t.Errorf("a given rate limiter was replaced (QPS %v)", r.kcp.QPS)
	}
}
