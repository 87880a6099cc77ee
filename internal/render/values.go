package render

import (
	"fmt"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// Names of the variables every template sees.
const (
	// VarService is the SFService, as .service.
	VarService = "service"
	// VarPlan is the SFPlan, as .plan.
	VarPlan = "plan"
	// VarInstance is the SFServiceInstance, as .instance.
	VarInstance = "instance"
	// VarBinding is the SFServiceBinding of bind and unbind templates, as
	// .binding.
	VarBinding = "binding"
)

// osbScheme knows the kinds of the osb API, to fill in the apiVersion and
// kind that typed objects read from a cache lack.
var osbScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := osbv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// Values builds the variables of a template from the catalog and request
// objects: each object becomes a map as it would read in JSON
// (.instance.metadata.name, .plan.spec.context.x). A nil object (for
// example the binding of a provision) leaves its variable unset.
// metadata.managedFields is left out: it is bookkeeping of the API server,
// large, and of no use to a template.
func Values(service, plan, instance, binding client.Object) (map[string]any, error) {
	vals := make(map[string]any, 4)
	for _, v := range []struct {
		name string
		obj  client.Object
	}{{VarService, service}, {VarPlan, plan}, {VarInstance, instance}, {VarBinding, binding}} {
		if isNil(v.obj) {
			continue
		}
		m, err := ObjectValue(v.obj)
		if err != nil {
			return nil, fmt.Errorf("template variable %s: %w", v.name, err)
		}
		vals[v.name] = m
	}
	return vals, nil
}

// ObjectValue converts one object into the map a template sees, with
// apiVersion and kind filled in for osb kinds and without managedFields.
// The map is a copy.
func ObjectValue(obj client.Object) (map[string]any, error) {
	var m map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m = copyMap(u.Object)
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, err
		}
		if m["kind"] == nil || m["kind"] == "" {
			if gvk, err := apiutil.GVKForObject(obj, osbScheme); err == nil {
				m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
			}
		}
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	return m, nil
}

func isNil(obj client.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// WithSources returns a copy of values with each source object, fetched by
// the caller for the references of the sources template, as a variable
// named by its key (.postgresql, .secret). Every template sees them:
// provision, bind, unbind and status, as in Service Fabrik. A source that
// could not be found is passed as nil, or not at all, and stays unset;
// templates guard such variables with "with".
//
// A source named like a variable (.service, .plan, .instance, .binding)
// replaces it when the object was found, and leaves it as it was when not:
// Service Fabrik puts the fetched sources into the same map as the
// variables, after them. Its postgres sample names a Kubernetes Service
// "service" and reads it as .service in its status template.
func WithSources(values map[string]any, sources map[string]*unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(values)+len(sources))
	for k, v := range values {
		out[k] = v
	}
	for name, obj := range sources {
		if obj == nil {
			continue
		}
		m := copyMap(obj.Object)
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
		out[name] = m
	}
	return out
}

// ParseSources reads the rendered sources template: a mapping of variable
// name to object reference {apiVersion, kind, name, namespace}. Namespace
// may be empty for a cluster-scoped object.
//
// An entry without a name, apiVersion or kind is skipped: its variable
// stays unset, as in Service Fabrik, which looks up only entries with a
// name (its director sample names the binding's object, which has no name
// before there is a binding) and ignores a look-up that fails for want of
// apiVersion or kind. An empty entry is skipped likewise. An entry that is
// not a mapping, or whose fields are not strings, is an error.
func ParseSources(rendered map[string]any) (map[string]osbv1alpha1.Source, error) {
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]osbv1alpha1.Source, len(rendered))
	for _, name := range names {
		if rendered[name] == nil {
			continue
		}
		m, ok := rendered[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("source %q is not a mapping of apiVersion, kind, name and namespace", name)
		}
		var ref osbv1alpha1.Source
		for _, f := range []struct {
			key string
			dst *string
		}{
			{"apiVersion", &ref.APIVersion},
			{"kind", &ref.Kind},
			{"name", &ref.Name},
			{"namespace", &ref.Namespace},
		} {
			switch v := m[f.key].(type) {
			case string:
				*f.dst = v
			case nil:
			default:
				return nil, fmt.Errorf("source %q: %s is not a string", name, f.key)
			}
		}
		if ref.Name == "" || ref.APIVersion == "" || ref.Kind == "" {
			continue
		}
		out[name] = ref
	}
	return out, nil
}
