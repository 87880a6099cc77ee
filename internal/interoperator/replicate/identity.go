package replicate

import (
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Labels that say, on a sister, whose a replicated object is. A sister may
// serve several masters (inter-operators of other onboarding clusters or
// landscapes) and tenants of its own, whose namespaces and objects may
// have the names of this master's: names prove nothing, so the replicator
// marks what it creates with UIDs, which the API servers assign and nobody
// can choose.
const (
	// LabelMaster holds the UID of the ProviderConfig of the
	// inter-operator that replicated the object: on replicas, on the
	// namespaces it created for them and on the catalog entries it copied.
	LabelMaster = "interoperator.marketplane.io/master"
	// LabelOriginal holds, on a replica, the UID of its original on the
	// onboarding cluster.
	LabelOriginal = "interoperator.marketplane.io/original-uid"
)

// ReasonReplicaConflict is the reason of an original whose object on the
// sister (the replica's namespace, the replica, a catalog entry, the bind
// response Secret) exists and is not this master's, or not this
// original's. That object is never updated, adopted or deleted; the
// operation fails.
const ReasonReplicaConflict = "ReplicaConflict"

// master is the identity of this inter-operator on the sisters: the UID
// of its ProviderConfig. Unlike the provider name, which every platform
// may use, or the namespace names, which tenants choose, it names one
// inter-operator, and deleting and creating the ProviderConfig again is
// the only way to change it (docs/multicluster.md says what to relabel
// then).
type master string

// masterOf returns the master identity of cfg.
func masterOf(cfg *interoperatorv1alpha1.ProviderConfig) (master, error) {
	if cfg == nil || cfg.UID == "" {
		return "", fmt.Errorf("the ProviderConfig has no UID to mark the replicas with")
	}
	return master(cfg.UID), nil
}

// whose tells, from its labels, whose an object on a sister is.
type whose int

const (
	// mine: this master's, or this original's.
	mine whose = iota
	// legacy: created by a replicator before the identity labels
	// existed; this master's if the namespace it is in is.
	legacy
	// foreign: another master's, another original's, or the sister's
	// own.
	foreign
)

// namespaceOf tells whose a namespace on the sister is. A namespace this
// master labelled is its; one an earlier replicator created (replica
// label, no master label) is legacy; anything else, such as a namespace of
// the sister's own tenants, another master's namespace, or one that
// existed before the replicator came, is foreign.
func (m master) namespaceOf(labels map[string]string) whose {
	return markedBy(labels, LabelMaster, string(m))
}

// replicaOf tells whose an SFServiceInstance or SFServiceBinding at the
// original's namespace and name on the sister is: the original's replica
// when it names the original's UID; an earlier replicator's when it is
// labelled a replica without naming an original; foreign otherwise.
func replicaOf(labels map[string]string, original types.UID) whose {
	return markedBy(labels, LabelOriginal, string(original))
}

// markedBy tells whose an object is by the label key: mine when it holds
// want, foreign when it holds anything else, legacy when it is missing on
// an object labelled a replica, foreign when both are missing.
func markedBy(labels map[string]string, key, want string) whose {
	switch v, ok := labels[key]; {
	case ok && v == want:
		return mine
	case ok:
		return foreign
	case labels[LabelReplica] == "true":
		return legacy
	}
	return foreign
}

// catalogEntryOf tells whose a copied SFService or SFPlan is: this
// master's when it carries its label, another's when it carries another
// master's, legacy when it carries none: the sister's own entries and the
// copies of a replicator from before the master label cannot be told
// apart, so such an entry is used only while it is the same as the
// master's (copyCatalog).
func (m master) catalogEntryOf(labels map[string]string) whose {
	switch owner, ok := labels[LabelMaster]; {
	case ok && owner == string(m):
		return mine
	case ok:
		return foreign
	}
	return legacy
}

// replicaLabels returns the labels of a replica: the original's, and the
// replica, master and original labels, which the original's own labels
// cannot override (a tenant may label its original as it likes).
func (m master) replicaLabels(original map[string]string, uid types.UID) map[string]string {
	out := maps.Clone(original)
	if out == nil {
		out = map[string]string{}
	}
	out[LabelReplica] = "true"
	out[LabelMaster] = string(m)
	out[LabelOriginal] = string(uid)
	return out
}

// catalogLabels returns the labels of a copied catalog entry: the
// entry's, and the master label.
func (m master) catalogLabels(entry map[string]string) map[string]string {
	out := maps.Clone(entry)
	if out == nil {
		out = map[string]string{}
	}
	out[LabelMaster] = string(m)
	return out
}

// conflict returns the error of a ReplicaConflict: an InvalidUserInput
// error, so that the runtime records the reason and does not retry until
// the original changes.
func conflict(format string, args ...any) error {
	return spruntime.InvalidUserInput(ReasonReplicaConflict, format, args...)
}

// controlledByOther reports whether obj has a controller other than the
// object with uid.
func controlledByOther(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID != uid
}
