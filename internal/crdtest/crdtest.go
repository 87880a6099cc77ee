// Package crdtest helps tests play an API server whose CRDs are older than
// the current ones: DropValidations removes a property's CEL rules for the
// length of a test, so that the test can store the values those rules refuse
// today, as objects written before the rules existed may hold them.
package crdtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Timeout bounds the wait for the API server to serve a changed CRD; it
// usually takes well under a second, but the machine may be loaded.
const Timeout = 60 * time.Second

// DropValidations removes the x-kubernetes-validations of the property at
// path (for example "spec", "ttl") from every version of the CRD named crd
// on the API server of cfg, then waits until accepted returns nil: accepted
// should try (with a dry run) to store an object that only the removed
// rules refuse. The returned restore puts the rules back and waits until
// accepted fails again: a test calls it to play an upgrade (objects stored
// under the old CRD, then today's CRD installed), and it runs when the test
// ends in any case, so that later tests see today's CRD. Tests that create
// objects refused by the rules should delete them in a cleanup registered
// after DropValidations (cleanups run last in, first out).
func DropValidations(t testing.TB, cfg *rest.Config, crd string, path []string, accepted func(ctx context.Context) error) (restore func()) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client for CRD %s: %v", crd, err)
	}
	saved := map[string]apiextensionsv1.ValidationRules{}
	if err := editProperty(t.Context(), c, crd, path, func(version string, p *apiextensionsv1.JSONSchemaProps) {
		saved[version] = p.XValidations
		p.XValidations = nil
	}); err != nil {
		t.Fatalf("drop the rules of %v from CRD %s: %v", path, crd, err)
	}
	var once sync.Once
	restore = func() { once.Do(func() { restoreRules(t, c, crd, path, saved, accepted) }) }
	t.Cleanup(restore)
	var last error
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		last = accepted(ctx)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("CRD %s without the rules of %v: the API server still refuses the probe after %s: %v", crd, path, Timeout, last)
	}
	return restore
}

// restoreRules puts the saved rules back and waits until accepted fails.
func restoreRules(t testing.TB, c client.Client, crd string, path []string, saved map[string]apiextensionsv1.ValidationRules, accepted func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := editProperty(ctx, c, crd, path, func(version string, p *apiextensionsv1.JSONSchemaProps) {
		p.XValidations = saved[version]
	}); err != nil {
		t.Errorf("restore the rules of %v in CRD %s: %v", path, crd, err)
		return
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return accepted(ctx) != nil, nil
	}); err != nil {
		t.Errorf("CRD %s: the API server still accepts what the restored rules of %v refuse after %s", crd, path, Timeout)
	}
}

// editProperty applies edit to the property at path of every version of the
// CRD, retrying on conflicts.
func editProperty(ctx context.Context, c client.Client, crd string, path []string, edit func(version string, p *apiextensionsv1.JSONSchemaProps)) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, Timeout, true, func(ctx context.Context) (bool, error) {
		obj := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd}, obj); err != nil {
			return false, err
		}
		for i := range obj.Spec.Versions {
			v := &obj.Spec.Versions[i]
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return false, fmt.Errorf("version %s has no schema", v.Name)
			}
			name := v.Name
			if err := editAt(v.Schema.OpenAPIV3Schema, path, func(p *apiextensionsv1.JSONSchemaProps) { edit(name, p) }); err != nil {
				return false, fmt.Errorf("version %s: %w", v.Name, err)
			}
		}
		err := c.Update(ctx, obj)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// editAt applies edit to the property at path below p. Properties are held
// by value, so each level is copied, edited and put back.
func editAt(p *apiextensionsv1.JSONSchemaProps, path []string, edit func(*apiextensionsv1.JSONSchemaProps)) error {
	if len(path) == 0 {
		edit(p)
		return nil
	}
	child, ok := p.Properties[path[0]]
	if !ok {
		return fmt.Errorf("no property %q", path[0])
	}
	if err := editAt(&child, path[1:], edit); err != nil {
		return fmt.Errorf("%s.%w", path[0], err)
	}
	p.Properties[path[0]] = child
	return nil
}

// DurationCorpus holds strings on both sides of time.ParseDuration's syntax:
// the tests of common.Duration compare its pattern with time.ParseDuration
// on them, and the CRD tests send them to a real API server.
var DurationCorpus = []string{
	// Valid.
	"0", "+0", "-0", "0s", "1s", "30s", "5m", "1h", "1h30m", "1h30m15s", "1.5h", ".5s", "1.s", "1.5m30.25s",
	"100ms", "10us", "10µs", "10μs", "7ns", "1m0s", "24h0m0s", "+5m", "2562047h", "9223372036854775807ns",
	"1s1s", "00001s", "1h1h1h",
	// Negative: valid Go, refused by the rule and by Parse.
	"-5s", "-1h30m", "-0.5s",
	// Invalid.
	"", " ", "1 fortnight", "often", "30", "1", "1d", "1w", "1y", "1 h", "1h ", " 1h", "1h 30m", "1H", "1S",
	"1ms1", "h", "s", ".", ".s", "-.s", "1..5s", "1.5.5s", "1e3s", "0x10s", "+-1s", "--1s", "1hm", "1mh30",
	"P1D", "PT1H", "1h\n", "1\u00a0s", "1µ", "１s",
	// Too large for a time.Duration: only time.ParseDuration refuses them.
	"9223372036854775808ns", "2562048h", "99999999999999999999s",
}

// QuantityAccepted and QuantityRefused hold strings on both sides of the
// bound of a quantity (common.QuantityRule): the tests of
// common.ParseQuantity check that it parses exactly the first, and the CRD
// tests send both to a real API server in every quantity field.
var (
	// QuantityAccepted is Kubernetes' syntax within the bound.
	QuantityAccepted = []string{
		"0", "1", "+1", "2", "0.5", ".5", "1.", "500m", "100n", "10u", "1k", "1.5Gi", "128974848", "129e6", "129M",
		"123Mi", "1e3", "1E3", "1e+3", "1e-3", "1e-99", "7Ei", "9E", "9223372036854775807", "00001",
		"1.000000000000000000000000000000000000000000000000000000000001", // 62 characters
		// Kubernetes caps a value with a binary suffix at 2^63-1.
		"8Ei", "1000Ei",
	}
	// QuantityRefused is outside the bound.
	QuantityRefused = []string{
		// The bombs of kubernetes/kubernetes#131063 and their kin: parsing,
		// or adding and comparing, takes practically forever.
		"1e999999999", "1e+9999999", "1E-99999999", "1e-9999999", "2E6024865272343", "1e2147483648", "1e100",
		strings.Repeat("9", 10000),
		// Kubernetes' pattern allows it; resource.ParseQuantity does not.
		"1e2.5",
		// Longer than 64 characters.
		"1." + strings.Repeat("0", 63),
		// Beyond 2^63-1.
		"9223372036854775808", "1e19", "10E", "99999999999999999999",
		// Negative.
		"-1", "-0.5", "-1e-3", "-0",
		// Not a quantity at all.
		"", " 1", "1 ", "1Kb", "1KiB", "abc", "1e", "0x10", "1,5", "\uff11",
	}
)
