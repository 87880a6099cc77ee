// Package brokerobj builds the objects the OSB broker records, as the
// benchmarks create them in its place.
package brokerobj

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// Instance returns the SFServiceInstance the broker records for a
// provision request of id with serviceID and planID, stored at key: the
// broker's finalizer, the in_queue label (no status: an empty state means
// in_queue).
func Instance(key client.ObjectKey, id, serviceID, planID string) *osbv1alpha1.SFServiceInstance {
	return &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Finalizers: []string{osbv1alpha1.FinalizerBroker},
			Labels:     map[string]string{osbv1alpha1.LabelLastOperation: string(osbv1alpha1.StateInQueue)},
		},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID: id, ServiceID: serviceID, PlanID: planID,
			OrganizationGUID: "bench-org", SpaceGUID: "bench-space",
			Context: &runtime.RawExtension{Raw: []byte(`{"platform":"kubernetes","namespace":"bench"}`)},
		},
	}
}
