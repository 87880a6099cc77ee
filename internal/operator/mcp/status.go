package mcp

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// Reason is the reason of a condition of a ManagedControlPlane.
type Reason string

// The reasons the controller sets. A ClusterRequestReady condition of a
// denied request carries the ClusterRequest's own reason instead, when it has
// a valid one.
const (
	// ReasonInvalidName: the MCP's name is too long to be stored in labels.
	ReasonInvalidName Reason = "InvalidName"
	// ReasonNameConflict: a control plane of the other kind
	// (ManagedControlPlane or ControlPlane) with the same namespace and name
	// holds the platform namespace; this one gets nothing.
	ReasonNameConflict Reason = "NameConflict"

	// ReasonClusterRequestPending: the ClusterRequest has been neither granted
	// nor denied yet.
	ReasonClusterRequestPending Reason = "ClusterRequestPending"
	// ReasonClusterRequestGranted: the ClusterRequest has been granted.
	ReasonClusterRequestGranted Reason = "ClusterRequestGranted"
	// ReasonClusterRequestDenied: the ClusterRequest has been denied.
	ReasonClusterRequestDenied Reason = "ClusterRequestDenied"

	// ReasonAccessRequestPending: the AccessRequest has been neither granted
	// nor denied yet.
	ReasonAccessRequestPending Reason = "AccessRequestPending"
	// ReasonAccessRequestDenied: the AccessRequest has been denied.
	ReasonAccessRequestDenied Reason = "AccessRequestDenied"
	// ReasonKubeconfigMissing: the AccessRequest is granted but its Secret,
	// or the Secret's kubeconfig key, is not there (yet).
	ReasonKubeconfigMissing Reason = "KubeconfigMissing"
	// ReasonSecretConflict: a Secret of the kubeconfig Secret's name exists
	// on the onboarding cluster that does not belong to the MCP.
	ReasonSecretConflict Reason = "SecretConflict"
	// ReasonAccessReady: the kubeconfig has been copied and published in
	// status.access.
	ReasonAccessReady Reason = "AccessReady"
	// ReasonOIDCNotSupported: OIDC access was requested, which the cluster
	// providers of Marketplane cannot issue yet.
	ReasonOIDCNotSupported Reason = "OIDCNotSupported"
	// ReasonAccessNotReady: at least one requested access is not ready.
	ReasonAccessNotReady Reason = "AccessNotReady"
	// ReasonAllAccessReady: every requested access is ready.
	ReasonAllAccessReady Reason = "AllAccessReady"

	// ReasonReady: the MCP cluster is granted and every access is ready.
	ReasonReady Reason = "Ready"

	// ReasonDeletingServices: service objects of the MCP still exist.
	ReasonDeletingServices Reason = "DeletingServices"
	// ReasonAllServicesDeleted: no service object of the MCP is left.
	ReasonAllServicesDeleted Reason = "AllServicesDeleted"
	// ReasonDeletingClusterRequests: AccessRequests or the ClusterRequest of
	// the MCP still exist.
	ReasonDeletingClusterRequests Reason = "DeletingClusterRequests"
	// ReasonAllClusterRequestsDeleted: the MCP's AccessRequests and
	// ClusterRequest are gone.
	ReasonAllClusterRequestsDeleted Reason = "AllClusterRequestsDeleted"
	// ReasonTerminating: the MCP is being deleted.
	ReasonTerminating Reason = "Terminating"
)

// warningReasons are the reasons that get a Warning rather than a Normal
// event: they need someone to act.
var warningReasons = map[string]bool{
	string(ReasonInvalidName):          true,
	string(ReasonNameConflict):         true,
	string(ReasonClusterRequestDenied): true,
	string(ReasonAccessRequestDenied):  true,
	string(ReasonSecretConflict):       true,
	string(ReasonOIDCNotSupported):     true,
}

// setCondition sets a condition of the MCP for its current generation.
func setCondition(m object, typ string, status metav1.ConditionStatus, reason Reason, message string) {
	setRawCondition(m, typ, status, string(reason), message)
}

// setRawCondition is setCondition with a reason that may come from another
// object (a denied ClusterRequest's reason is passed through).
func setRawCondition(m object, typ string, status metav1.ConditionStatus, reason, message string) {
	apimeta.SetStatusCondition(&m.ControlPlaneStatus().Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		ObservedGeneration: m.GetGeneration(),
		Reason:             reason,
		Message:            message,
	})
}

// removeConditions removes the conditions whose type starts with prefix and
// is not in keep.
func removeConditions(m object, prefix string, keep map[string]bool) {
	st := m.ControlPlaneStatus()
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if strings.HasPrefix(c.Type, prefix) && !keep[c.Type] {
			continue
		}
		out = append(out, c)
	}
	st.Conditions = out
}

// conditionTrue reports whether the MCP has condition typ with status True.
func conditionTrue(m object, typ string) bool {
	return apimeta.IsStatusConditionTrue(m.ControlPlaneStatus().Conditions, typ)
}

// summarize sets AllAccessReady from the AccessReady.* conditions, Ready from
// ClusterRequestReady and AllAccessReady, and the phase. It is called at the
// end of a reconcile of an MCP that is not being deleted.
func summarize(m object) {
	st := m.ControlPlaneStatus()
	var notReady []string
	for _, c := range st.Conditions {
		if strings.HasPrefix(c.Type, corev2alpha1.ConditionPrefixAccessReady) && c.Status != metav1.ConditionTrue {
			notReady = append(notReady, strings.TrimPrefix(c.Type, corev2alpha1.ConditionPrefixAccessReady))
		}
	}
	if len(notReady) == 0 {
		setCondition(m, corev2alpha1.ConditionAllAccessReady, metav1.ConditionTrue, ReasonAllAccessReady, "Every requested access is ready.")
	} else {
		setCondition(m, corev2alpha1.ConditionAllAccessReady, metav1.ConditionFalse, ReasonAccessNotReady,
			"Access not ready: "+strings.Join(notReady, ", ")+".")
	}

	cr := apimeta.FindStatusCondition(st.Conditions, corev2alpha1.ConditionClusterRequestReady)
	switch {
	case cr == nil || cr.Status != metav1.ConditionTrue:
		reason, msg := ReasonClusterRequestPending, "Waiting for the MCP cluster."
		if cr != nil {
			msg = cr.Message
			if cr.Reason != string(ReasonClusterRequestPending) {
				reason = ReasonClusterRequestDenied
			}
		}
		setCondition(m, common.ConditionTypeReady, metav1.ConditionFalse, reason, msg)
	case len(notReady) > 0:
		setCondition(m, common.ConditionTypeReady, metav1.ConditionFalse, ReasonAccessNotReady,
			"Access not ready: "+strings.Join(notReady, ", ")+".")
	default:
		setCondition(m, common.ConditionTypeReady, metav1.ConditionTrue, ReasonReady, "The MCP cluster is granted and every access is ready.")
	}
	if conditionTrue(m, common.ConditionTypeReady) {
		st.Phase = common.StatusPhaseReady
	} else {
		st.Phase = common.StatusPhaseProgressing
	}
}

// transitions returns the conditions of now that are new or whose status or
// reason differ from before, in the order of now: what deserves an event.
func transitions(before, now []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range now {
		old := apimeta.FindStatusCondition(before, c.Type)
		if old == nil || old.Status != c.Status || old.Reason != c.Reason {
			out = append(out, c)
		}
	}
	return out
}

// eventType is the event type for a condition: Warning for reasons that need
// someone to act, Normal otherwise.
func eventType(c metav1.Condition) string {
	if c.Status != metav1.ConditionTrue && warningReasons[c.Reason] {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}
