package apply

import (
	"slices"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// Labels the provisioner puts on every object it applies. The render
// policy reads them to tell an instance's objects and namespaces from
// everyone else's.
const (
	// LabelInstanceID holds the instance's id on target clusters (the
	// template variable .instanceId): its name when the broker created
	// it, else a name derived from its namespace and name. It says which
	// instance an object is for; ownership is decided by LabelInstanceUID.
	LabelInstanceID = "interoperator.servicefabrik.io/instance-id"
	// LabelBindingID holds the name of the SFServiceBinding of bind
	// resources.
	LabelBindingID = "interoperator.servicefabrik.io/binding-id"
	// LabelInstanceUID holds the UID of the SFServiceInstance. The API
	// server assigns it, so no tenant can choose it: it is what the render
	// policy compares, never a name.
	LabelInstanceUID = "interoperator.marketplane.io/instance-uid"
	// LabelBindingUID holds the UID of the SFServiceBinding of bind
	// resources.
	LabelBindingUID = "interoperator.marketplane.io/binding-uid"
)

// Owner is the instance, and for bind and unbind the binding, that an
// operation renders, applies, reads and deletes objects for.
type Owner struct {
	// InstanceUID is the instance's UID.
	InstanceUID string
	// InstanceID is the value of its LabelInstanceID.
	InstanceID string
	// BindingUID is the binding's UID, empty for the instance's own
	// operations.
	BindingUID string
	// BindingID is the value of the binding's LabelBindingID.
	BindingID string
	// Legacy are the label values objects applied before the UID labels
	// got: the instance's and binding's names as label values. Such an
	// object is the owner's only when Recorded lists it.
	LegacyInstanceID, LegacyBindingID string
	// Recorded are the objects the instance and binding recorded in their
	// status.resources, which only the inter-operator writes.
	Recorded []osbv1alpha1.Source
}

// Labels returns the labels every object of the owner gets.
func (o Owner) Labels() map[string]string {
	l := map[string]string{LabelInstanceID: o.InstanceID, LabelInstanceUID: o.InstanceUID}
	if o.BindingUID != "" {
		l[LabelBindingID] = o.BindingID
		l[LabelBindingUID] = o.BindingUID
	}
	return l
}

// recorded reports whether the owner recorded r.
func (o Owner) recorded(r osbv1alpha1.Source) bool { return slices.Contains(o.Recorded, r) }

// instanceOf tells whose instance an object with labels is: the owner's
// (mine), another's (foreign), or nobody's (neither: no instance label).
// An object labelled before the UID labels existed is the owner's only
// when its name label matches and the owner recorded it.
func (o Owner) instanceOf(labels map[string]string, r osbv1alpha1.Source) (mine, foreign bool) {
	if uid, ok := labels[LabelInstanceUID]; ok {
		return o.InstanceUID != "" && uid == o.InstanceUID, o.InstanceUID == "" || uid != o.InstanceUID
	}
	id, ok := labels[LabelInstanceID]
	if !ok {
		return false, false
	}
	if o.recorded(r) && (id == o.LegacyInstanceID || id == o.InstanceID) && id != "" {
		return true, false
	}
	return false, true
}

// otherBinding tells, for a binding's operation, whether an object with
// labels is another binding's. Objects without a binding label are the
// instance's, which every binding of it may use.
func (o Owner) otherBinding(labels map[string]string, r osbv1alpha1.Source) bool {
	if o.BindingUID == "" {
		return false
	}
	if uid, ok := labels[LabelBindingUID]; ok {
		return uid != o.BindingUID
	}
	id, ok := labels[LabelBindingID]
	if !ok {
		return false
	}
	// A label of an earlier version: the binding's when it recorded it.
	mine := o.recorded(r) && (id == o.LegacyBindingID || id == o.BindingID)
	return !mine
}

// owns reports whether an object with labels is the owner's: labelled
// for its instance and, for a binding's operation, for no other binding.
func (o Owner) owns(labels map[string]string, r osbv1alpha1.Source) bool {
	mine, _ := o.instanceOf(labels, r)
	return mine && !o.otherBinding(labels, r)
}

// foreign reports whether an object with labels belongs to another
// instance, or to another binding of the same instance, and says which.
// The message names no other instance: that would tell one tenant about
// another's.
func (o Owner) foreign(labels map[string]string, r osbv1alpha1.Source) (bool, string) {
	if _, foreign := o.instanceOf(labels, r); foreign {
		return true, "it belongs to another instance"
	}
	if o.otherBinding(labels, r) {
		return true, "it belongs to another binding"
	}
	return false, ""
}

// another reports whether labels name, by UID, another instance or
// binding than o. What o leaves empty is not compared. Deletion asks this
// rather than foreign: it needs proof that an object is someone else's
// before it leaves an object it recorded behind.
//
// For a binding, its own UID label decides: the binding's objects are its
// own whatever instance they name (a binding outliving its instance may
// resolve to a new instance of the same name).
func (o Owner) another(labels map[string]string) bool {
	if uid, ok := labels[LabelBindingUID]; ok && o.BindingUID != "" {
		return uid != o.BindingUID
	}
	uid, ok := labels[LabelInstanceUID]
	return ok && o.InstanceUID != "" && uid != o.InstanceUID
}
