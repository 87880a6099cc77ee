package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// splitDocuments splits YAML text at "---" lines and drops documents that
// hold only white space and comments.
func splitDocuments(text string) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if !isBlank(doc) {
			docs = append(docs, doc)
		}
	}
}

// isBlank reports whether a YAML document holds only white space, comments
// and document markers.
func isBlank(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		l := bytes.TrimSpace(line)
		if len(l) == 0 || l[0] == '#' || bytes.Equal(l, []byte("---")) || bytes.Equal(l, []byte("...")) {
			continue
		}
		return false
	}
	return true
}

// decodeYAML decodes one YAML document with Kubernetes' number handling:
// integers become int64, other numbers float64.
func decodeYAML(doc []byte) (any, error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeObjects decodes every non-blank YAML document of text into an
// object. Each must be a mapping with apiVersion and kind.
func decodeObjects(text string) ([]*unstructured.Unstructured, error) {
	docs, err := splitDocuments(text)
	if err != nil {
		return nil, fmt.Errorf("split YAML documents: %w", err)
	}
	objs := make([]*unstructured.Unstructured, 0, len(docs))
	for i, doc := range docs {
		v, err := decodeYAML(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if v == nil { // a document of only "~" or "null"
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("document %d is not a mapping but a %T", i+1, v)
		}
		obj := &unstructured.Unstructured{Object: m}
		if s, ok := m["apiVersion"].(string); !ok || s == "" {
			return nil, fmt.Errorf("document %d has no apiVersion", i+1)
		}
		if s, ok := m["kind"].(string); !ok || s == "" {
			return nil, fmt.Errorf("document %d (%s) has no kind", i+1, obj.GetAPIVersion())
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// decodeMap decodes text as one YAML mapping.
func decodeMap(text string) (map[string]any, error) {
	docs, err := splitDocuments(text)
	if err != nil {
		return nil, fmt.Errorf("split YAML documents: %w", err)
	}
	switch len(docs) {
	case 0:
		return map[string]any{}, nil
	case 1:
	default:
		return nil, fmt.Errorf("the output has %d YAML documents; want one mapping", len(docs))
	}
	v, err := decodeYAML(docs[0])
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	default:
		return nil, fmt.Errorf("the output is not a mapping but a %T", v)
	}
}
