package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// IndexID is the field index, on SFServices and SFPlans, of spec.id.
const IndexID = "spec.id"

// IndexFields registers the field indexes Plan and Service use with the
// indexer of the cache they read from (the platform cluster's). It must be
// called before the cache starts.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &osbv1alpha1.SFPlan{}, IndexID, func(o client.Object) []string {
		return []string{o.(*osbv1alpha1.SFPlan).Spec.ID}
	}); err != nil {
		return fmt.Errorf("index SFPlans by %s: %w", IndexID, err)
	}
	if err := indexer.IndexField(ctx, &osbv1alpha1.SFService{}, IndexID, func(o client.Object) []string {
		return []string{o.(*osbv1alpha1.SFService).Spec.ID}
	}); err != nil {
		return fmt.Errorf("index SFServices by %s: %w", IndexID, err)
	}
	return nil
}

// Plan returns the SFPlan with the OSB plan id in namespace, or nil when
// there is none. With several, the oldest wins (the catalog marks the
// others not Ready). One being deleted is returned only when no other has
// the id: the catalog keeps it while instances use it (Finalizer). reader
// must have the IndexID index.
func Plan(ctx context.Context, reader client.Reader, namespace, id string) (*osbv1alpha1.SFPlan, error) {
	list := &osbv1alpha1.SFPlanList{}
	if err := reader.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{IndexID: id}); err != nil {
		return nil, fmt.Errorf("list SFPlans with id %s in %s: %w", id, namespace, err)
	}
	var found *osbv1alpha1.SFPlan
	for i := range list.Items {
		if p := &list.Items[i]; found == nil || better(p, found) {
			found = p
		}
	}
	return found, nil
}

// Service returns the SFService with the OSB service id in namespace, or
// nil when there is none. With several, the oldest wins; one being
// deleted only when no other has the id. reader must have the IndexID
// index.
func Service(ctx context.Context, reader client.Reader, namespace, id string) (*osbv1alpha1.SFService, error) {
	list := &osbv1alpha1.SFServiceList{}
	if err := reader.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{IndexID: id}); err != nil {
		return nil, fmt.Errorf("list SFServices with id %s in %s: %w", id, namespace, err)
	}
	var found *osbv1alpha1.SFService
	for i := range list.Items {
		if s := &list.Items[i]; found == nil || better(s, found) {
			found = s
		}
	}
	return found, nil
}

// SpecHash is the hash of a plan's spec: the plan's status.specHash, and
// the value of the planhash annotation on instances that the plan was
// last applied to.
func SpecHash(plan *osbv1alpha1.SFPlan) string {
	b, err := json.Marshal(plan.Spec)
	if err != nil {
		// The spec came from JSON; it always encodes.
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
