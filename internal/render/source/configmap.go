package source

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConfigMapGetter reads a ConfigMap. The provisioner passes its client;
// tests pass a ConfigMapGetterFunc.
type ConfigMapGetter interface {
	// GetConfigMap returns the ConfigMap namespace/name, or an error that
	// apierrors.IsNotFound recognises when there is none.
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// ConfigMapGetterFunc adapts a function to ConfigMapGetter.
type ConfigMapGetterFunc func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)

// GetConfigMap calls fn.
func (fn ConfigMapGetterFunc) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return fn(ctx, namespace, name)
}

// ReaderConfigMapGetter reads ConfigMaps with a controller-runtime reader,
// for example a manager's cached client.
func ReaderConfigMapGetter(r client.Reader) ConfigMapGetter {
	return ConfigMapGetterFunc(func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
		cm := &corev1.ConfigMap{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm); err != nil {
			return nil, err
		}
		return cm, nil
	})
}

func (f *Fetcher) fetchConfigMap(ctx context.Context, u *url.URL, maxBytes int64) ([]byte, error) {
	if f.configMaps == nil {
		return nil, &Error{Err: errors.New("configmap URLs are disabled: the operator was not given a ConfigMap reader")}
	}
	namespace := u.Host
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if namespace == "" || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return nil, &Error{Err: errors.New("a configmap URL has the form configmap://<namespace>/<name>/<key>")}
	}
	name, key := parts[0], parts[1]
	cm, err := f.configMaps.GetConfigMap(ctx, namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &Error{Err: fmt.Errorf("ConfigMap %s/%s not found", namespace, name)}
		}
		return nil, &Error{Transient: true, Err: fmt.Errorf("get ConfigMap %s/%s: %w", namespace, name, err)}
	}
	var body []byte
	if b, ok := cm.BinaryData[key]; ok {
		body = b
	} else if s, ok := cm.Data[key]; ok {
		body = []byte(s)
	} else {
		return nil, &Error{Err: fmt.Errorf("ConfigMap %s/%s has no key %q", namespace, name, key)}
	}
	if int64(len(body)) > maxBytes {
		return nil, &Error{Err: tooLarge(maxBytes)}
	}
	return body, nil
}
