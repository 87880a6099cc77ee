package replicate

import (
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

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

func TestWhose(t *testing.T) {
	const me, other = master("me"), "other"
	const original, another = types.UID("u1"), "u2"
	tests := map[string]struct {
		reason string
		got    whose
		want   whose
	}{
		"NamespaceMine":       {reason: "A namespace this master created is its.", got: me.namespaceOf(map[string]string{LabelReplica: "true", LabelMaster: "me"}), want: mine},
		"NamespaceOther":      {reason: "Another master's namespace is never used.", got: me.namespaceOf(map[string]string{LabelReplica: "true", LabelMaster: other}), want: foreign},
		"NamespaceSisters":    {reason: "A namespace the replicator did not create (the sister's tenant's) is never used.", got: me.namespaceOf(map[string]string{"team": "a"}), want: foreign},
		"NamespaceEarlier":    {reason: "An earlier replicator's namespace may be claimed.", got: me.namespaceOf(map[string]string{LabelReplica: "true"}), want: legacy},
		"ReplicaMine":         {reason: "The replica names its original's UID.", got: replicaOf(map[string]string{LabelReplica: "true", LabelOriginal: "u1"}, original), want: mine},
		"ReplicaOther":        {reason: "A replica of another original, even of this master, is not adopted.", got: replicaOf(map[string]string{LabelReplica: "true", LabelMaster: "me", LabelOriginal: another}, original), want: foreign},
		"ReplicaEarlier":      {reason: "An earlier replicator's replica names no original.", got: replicaOf(map[string]string{LabelReplica: "true"}, original), want: legacy},
		"ReplicaSisters":      {reason: "The sister's own instance is no replica.", got: replicaOf(map[string]string{"owner": "x"}, original), want: foreign},
		"CatalogMine":         {reason: "This master's copy.", got: me.catalogEntryOf(map[string]string{LabelMaster: "me"}), want: mine},
		"CatalogOther":        {reason: "Another master's copy is never overwritten.", got: me.catalogEntryOf(map[string]string{LabelMaster: other}), want: foreign},
		"CatalogWithoutLabel": {reason: "The sister's own entry or an earlier copy: used only while the same.", got: me.catalogEntryOf(nil), want: legacy},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("%s\ngot %d, want %d", tc.reason, tc.got, tc.want)
			}
		})
	}
}

// TestReplicaLabelsCannotBeForged shows that a tenant who labels its
// original like another master's or another original's replica does not
// make its replica theirs.
func TestReplicaLabelsCannotBeForged(t *testing.T) {
	forged := map[string]string{LabelMaster: "other", LabelOriginal: "victim", LabelReplica: "false", "app": "x"}
	got := master("me").replicaLabels(forged, "u1")
	want := map[string]string{LabelMaster: "me", LabelOriginal: "u1", LabelReplica: "true", "app": "x"}
	if !maps.Equal(got, want) {
		t.Errorf("replicaLabels(%v) = %v, want %v", forged, got, want)
	}
	if forged[LabelMaster] != "other" {
		t.Errorf("replicaLabels changed the original's labels: %v", forged)
	}
}

// TestSisterPlanSpec checks that the sister's copy of a plan has every
// template but the clusterSelector, and that the master's plan is left as
// it is.
func TestSisterPlanSpec(t *testing.T) {
	plan := &osbv1alpha1.SFPlan{Spec: osbv1alpha1.SFPlanSpec{Templates: []osbv1alpha1.TemplateSpec{
		{Action: osbv1alpha1.ActionProvision, Content: "p"},
		{Action: osbv1alpha1.ActionClusterSelector, Content: "tier=gold"},
		{Action: osbv1alpha1.ActionStatus, Content: "s"},
	}}}
	got := sisterPlanSpec(plan)
	if len(got.Templates) != 2 || got.Templates[0].Action != osbv1alpha1.ActionProvision || got.Templates[1].Action != osbv1alpha1.ActionStatus {
		t.Errorf("the sister's templates are %+v; want provision and status, without the clusterSelector", got.Templates)
	}
	if len(plan.Spec.Templates) != 3 || plan.Spec.Templates[1].Action != osbv1alpha1.ActionClusterSelector {
		t.Errorf("the master's plan changed: %+v", plan.Spec.Templates)
	}
}
