package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// AnyTag is the tag of an image map entry that matches every tag (and
// digest) of its repository.
const AnyTag = "*"

// ImageMap maps provider images to local binaries. In a file (YAML or
// JSON, see LoadImageMap) it reads:
//
//	images:
//	- image: ghcr.io/openmcp-project/images/service-provider-example:v1.0.0
//	  binary: /usr/local/bin/service-provider-example
//	- image: ghcr.io/marketplane/velero:*
//	  binary: bin/velero
//
// An entry's image is either an exact reference (repo:tag or repo@digest),
// or repo:* for any tag or digest of repo. An exact entry wins over a
// wildcard one. A relative binary path is relative to the file's directory.
type ImageMap struct {
	// Images are the entries.
	Images []ImageMapping `json:"images"`
	// Source names where the map came from, for messages (the file path
	// when loaded with LoadImageMap).
	Source string `json:"-"`
}

// ImageMapping maps one image, or every tag of a repository, to a binary.
type ImageMapping struct {
	// Image is repo:tag, repo@digest or repo:*.
	Image string `json:"image"`
	// Binary is the path of the provider binary.
	Binary string `json:"binary"`
}

// LoadImageMap reads an image map from a YAML or JSON file. Relative binary
// paths are made absolute against the file's directory.
func LoadImageMap(path string) (ImageMap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ImageMap{}, fmt.Errorf("read image map: %w", err)
	}
	var m ImageMap
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return ImageMap{}, fmt.Errorf("parse image map %s: %w", path, err)
	}
	m.Source = path
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return ImageMap{}, fmt.Errorf("image map %s: %w", path, err)
	}
	for i := range m.Images {
		if b := m.Images[i].Binary; b != "" && !filepath.IsAbs(b) {
			m.Images[i].Binary = filepath.Join(abs, b)
		}
	}
	if err := m.Validate(); err != nil {
		return ImageMap{}, err
	}
	return m, nil
}

// Validate reports entries without an image or binary, malformed
// wildcards and images mapped twice.
func (m ImageMap) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, e := range m.Images {
		switch {
		case e.Image == "":
			errs = append(errs, fmt.Errorf("entry %d: image is empty", i))
			continue
		case e.Binary == "":
			errs = append(errs, fmt.Errorf("entry %d (%s): binary is empty", i, e.Image))
		}
		repo, tag, digest := splitImage(e.Image)
		if repo == "" {
			errs = append(errs, fmt.Errorf("entry %d: image %q has no repository", i, e.Image))
		}
		if strings.Contains(repo, AnyTag) || strings.Contains(digest, AnyTag) || (strings.Contains(tag, AnyTag) && tag != AnyTag) {
			errs = append(errs, fmt.Errorf("entry %d: image %q: a wildcard must be the whole tag (repo:*)", i, e.Image))
		}
		if seen[e.Image] {
			errs = append(errs, fmt.Errorf("entry %d: image %q is mapped twice", i, e.Image))
		}
		seen[e.Image] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("image map %s: %w", m.source(), err)
	}
	return nil
}

// Binary returns the binary image is mapped to: the entry with exactly
// that reference, else the repo:* entry of its repository. An image
// without a tag or digest is taken as repo:latest, as a container runtime
// would.
func (m ImageMap) Binary(image string) (string, error) {
	repo, tag, digest := splitImage(image)
	if tag == "" && digest == "" {
		tag = "latest"
	}
	exact := repo + ":" + tag
	if digest != "" {
		exact = image
	}
	wildcard := ""
	for _, e := range m.Images {
		switch e.Image {
		case image, exact:
			return e.Binary, nil
		case repo + ":" + AnyTag:
			wildcard = e.Binary
		}
	}
	if wildcard != "" {
		return wildcard, nil
	}
	return "", fmt.Errorf("image %q is not mapped to a local binary: add an entry %q or %q to the image map %s",
		image, exact, repo+":"+AnyTag, m.source())
}

func (m ImageMap) source() string {
	if m.Source == "" {
		return "(in memory)"
	}
	return m.Source
}

// splitImage splits an image reference into repository, tag and digest.
// The tag is what follows the last colon after the last slash, so that a
// registry port (localhost:5000/x) is not taken for a tag.
func splitImage(image string) (repo, tag, digest string) {
	repo = image
	if i := strings.LastIndex(repo, "@"); i >= 0 {
		repo, digest = repo[:i], repo[i+1:]
	}
	if i := strings.LastIndex(repo, ":"); i >= 0 && !strings.Contains(repo[i+1:], "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}
