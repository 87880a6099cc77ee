package testenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFieldDiffs(t *testing.T) {
	cases := map[string]struct {
		reason string
		want   map[string]any
		got    map[string]any
		diffs  []string
	}{
		"Identical": {
			reason: "The same object has no differences.",
			want:   map[string]any{"spec": map[string]any{"image": "a", "n": int64(1)}},
			got:    map[string]any{"spec": map[string]any{"image": "a", "n": int64(1)}},
		},
		"ExtraFieldsInGot": {
			reason: "Defaults and server metadata are not differences.",
			want:   map[string]any{"spec": map[string]any{"image": "a"}},
			got:    map[string]any{"spec": map[string]any{"image": "a", "verbosity": "INFO"}, "status": map[string]any{}},
		},
		"NumbersCompareByValue": {
			reason: "YAML decodes 1 as int64, JSON as float64; both are 1.",
			want:   map[string]any{"n": int64(1)},
			got:    map[string]any{"n": float64(1)},
		},
		"NullIsAbsent": {
			reason: "A null the user wrote may be dropped by the server.",
			want:   map[string]any{"spec": map[string]any{"parameters": nil}},
			got:    map[string]any{"spec": map[string]any{}},
		},
		"Pruned": {
			reason: "A field the server dropped is reported with its path.",
			want:   map[string]any{"spec": map[string]any{"dashboardClient": map[string]any{"redirectURI": "x"}}},
			got:    map[string]any{"spec": map[string]any{"dashboardClient": map[string]any{}}},
			diffs:  []string{`spec.dashboardClient.redirectURI: missing (want "x")`},
		},
		"Changed": {
			reason: "A changed scalar and a shortened list are both reported.",
			want:   map[string]any{"spec": map[string]any{"image": "a", "tags": []any{"x", "y"}}},
			got:    map[string]any{"spec": map[string]any{"image": "b", "tags": []any{"x"}}},
			diffs:  []string{`spec.image: want "a", got "b"`, `spec.tags: want a list of 2, got a list of 1`},
		},
		"KeysWithDots": {
			reason: "Label keys with dots and slashes stay readable.",
			want:   map[string]any{"labels": map[string]any{"openmcp.cloud/cluster": "platform"}},
			got:    map[string]any{"labels": map[string]any{}},
			diffs:  []string{`labels[openmcp.cloud/cluster]: missing (want "platform")`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.diffs, FieldDiffs(tc.want, tc.got)); diff != "" {
				t.Errorf("%s\nFieldDiffs(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestBinaryDirReportsMissingBinaries(t *testing.T) {
	t.Setenv(AssetsEnv, t.TempDir())
	if _, err := BinaryDir(); err == nil {
		t.Fatal("BinaryDir with an empty KUBEBUILDER_ASSETS directory: want an error, got none")
	}
}
