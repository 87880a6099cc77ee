/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketplane/marketplane/api/common"
)

func TestProviderConfigDefaults(t *testing.T) {
	type want struct {
		Poll               time.Duration
		Catalog            string
		MaxObjects         int
		MaxTransientErrors int
	}
	tests := map[string]struct {
		reason string
		cfg    *ProviderConfig
		want   want
	}{
		"Nil": {
			reason: "A nil config gives the defaults instead of a panic.",
			want:   want{0, DefaultCatalogNamespace, DefaultMaxObjects, DefaultMaxTransientErrors},
		},
		"Empty": {
			reason: "An empty spec gives the defaults.",
			cfg:    &ProviderConfig{},
			want:   want{0, DefaultCatalogNamespace, DefaultMaxObjects, DefaultMaxTransientErrors},
		},
		"Set": {
			reason: "Set fields win.",
			cfg: &ProviderConfig{Spec: ProviderConfigSpec{PollInterval: common.DurationOf(time.Minute), CatalogNamespace: "cat",
				Limits: &Limits{MaxObjects: 5, MaxTransientErrors: 2}}},
			want: want{time.Minute, "cat", 5, 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := want{tc.cfg.PollInterval(), tc.cfg.CatalogNamespace(), tc.cfg.MaxObjects(), tc.cfg.MaxTransientErrors()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
