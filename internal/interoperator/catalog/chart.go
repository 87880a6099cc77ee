package catalog

import (
	"fmt"
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ChartArchive packages the Helm chart in directory dir as helm package
// does, and returns the archive and its file name (<name>-<version>.tgz).
// Plans of type helm name such an archive by url.
func ChartArchive(dir string) ([]byte, string, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, "", fmt.Errorf("load chart %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp("", "chart-")
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	path, err := chartutil.Save(ch, tmp)
	if err != nil {
		return nil, "", fmt.Errorf("package chart %s: %w", dir, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	return data, filepath.Base(path), nil
}

// ChartConfigMap returns a ConfigMap namespace/name holding the chart in
// dir, packaged, under the key <chart>-<version>.tgz: a plan reaches it
// with the url configmap://<namespace>/<name>/<chart>-<version>.tgz.
func ChartConfigMap(dir, namespace, name string) (*corev1.ConfigMap, error) {
	data, file, err := ChartArchive(dir)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		BinaryData: map[string][]byte{file: data},
	}, nil
}
