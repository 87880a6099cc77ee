package manifests

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecode(t *testing.T) {
	objs, err := Decode([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if diff := cmp.Diff([]string{"Namespace/a", "ConfigMap/b"}, got); diff != "" {
		t.Errorf("Decode: -want, +got:\n%s", diff)
	}
	if _, err := Decode([]byte("metadata:\n  name: a\n")); err == nil {
		t.Error("Decode of a document without apiVersion/kind: want an error, got none")
	}
}
