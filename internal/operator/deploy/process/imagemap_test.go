package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestImageMapBinary(t *testing.T) {
	m := ImageMap{Images: []ImageMapping{
		{Image: "ghcr.io/acme/velero:v1.0.0", Binary: "/bin/velero-v1"},
		{Image: "ghcr.io/acme/velero:*", Binary: "/bin/velero"},
		{Image: "localhost:5000/acme/flux:*", Binary: "/bin/flux"},
		{Image: "ghcr.io/acme/plain:latest", Binary: "/bin/plain"},
		{Image: "ghcr.io/acme/pinned@sha256:abc", Binary: "/bin/pinned"},
	}}
	cases := map[string]struct {
		reason  string
		image   string
		want    string
		wantErr string
	}{
		"ExactWins":        {reason: "an exact entry wins over the wildcard", image: "ghcr.io/acme/velero:v1.0.0", want: "/bin/velero-v1"},
		"WildcardTag":      {reason: "repo:* matches any tag", image: "ghcr.io/acme/velero:v2.3.4", want: "/bin/velero"},
		"WildcardDigest":   {reason: "repo:* matches a digest too", image: "ghcr.io/acme/velero@sha256:def", want: "/bin/velero"},
		"WildcardNoTag":    {reason: "repo:* matches an image without tag", image: "ghcr.io/acme/velero", want: "/bin/velero"},
		"RegistryPort":     {reason: "a registry port is not a tag", image: "localhost:5000/acme/flux:v1", want: "/bin/flux"},
		"ImplicitLatest":   {reason: "no tag means latest", image: "ghcr.io/acme/plain", want: "/bin/plain"},
		"Digest":           {reason: "a digest matches exactly", image: "ghcr.io/acme/pinned@sha256:abc", want: "/bin/pinned"},
		"OtherDigest":      {reason: "another digest does not match", image: "ghcr.io/acme/pinned@sha256:fff", wantErr: `image "ghcr.io/acme/pinned@sha256:fff" is not mapped`},
		"Unmapped":         {reason: "an unknown image is an error naming it", image: "ghcr.io/acme/other:v1", wantErr: `image "ghcr.io/acme/other:v1" is not mapped to a local binary: add an entry "ghcr.io/acme/other:v1" or "ghcr.io/acme/other:*"`},
		"PrefixNotMatched": {reason: "a wildcard does not match a longer repository", image: "ghcr.io/acme/velero-extra:v1", wantErr: "not mapped"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := m.Binary(tc.image)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s: got %q, %v; want error containing %q", tc.reason, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%s: got %q, %v; want %q", tc.reason, got, err, tc.want)
			}
		})
	}
}

func TestLoadImageMap(t *testing.T) {
	cases := map[string]struct {
		reason  string
		file    string
		content string
		want    []ImageMapping
		wantErr string
	}{
		"YAML": {
			reason: "YAML with an absolute and a relative binary; relative is against the file's directory",
			file:   "images.yaml",
			content: `images:
- image: ghcr.io/acme/velero:*
  binary: /opt/velero
- image: ghcr.io/acme/flux:v1
  binary: bin/flux
`,
			want: []ImageMapping{{Image: "ghcr.io/acme/velero:*", Binary: "/opt/velero"}, {Image: "ghcr.io/acme/flux:v1", Binary: "DIR/bin/flux"}},
		},
		"JSON": {
			reason:  "JSON works as well",
			file:    "images.json",
			content: `{"images":[{"image":"ghcr.io/acme/velero:v1","binary":"/opt/velero"}]}`,
			want:    []ImageMapping{{Image: "ghcr.io/acme/velero:v1", Binary: "/opt/velero"}},
		},
		"UnknownField": {
			reason:  "a misspelt field is an error, not silently ignored",
			file:    "images.yaml",
			content: "images:\n- image: a:v1\n  bianry: /x\n", //nolint:misspell // the misspelling is the input under test
			wantErr: "bianry",                                 //nolint:misspell // the misspelling is the input under test
		},
		"MissingBinary": {
			reason:  "an entry needs a binary",
			file:    "images.yaml",
			content: "images:\n- image: a:v1\n",
			wantErr: "binary is empty",
		},
		"PartialWildcard": {
			reason:  "only a whole-tag wildcard is supported",
			file:    "images.yaml",
			content: "images:\n- image: a:v1.*\n  binary: /x\n",
			wantErr: "a wildcard must be the whole tag",
		},
		"Duplicate": {
			reason:  "an image mapped twice is ambiguous",
			file:    "images.yaml",
			content: "images:\n- image: a:v1\n  binary: /x\n- image: a:v1\n  binary: /y\n",
			wantErr: "mapped twice",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.file)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := LoadImageMap(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s: got %v, want error containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			for i := range tc.want {
				tc.want[i].Binary = strings.Replace(tc.want[i].Binary, "DIR", dir, 1)
			}
			if diff := cmp.Diff(tc.want, m.Images); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if m.Source != path {
				t.Errorf("Source %q, want %q", m.Source, path)
			}
		})
	}
}
