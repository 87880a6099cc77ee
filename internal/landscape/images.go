package landscape

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/marketplane/marketplane/internal/operator/deploy/process"
)

// ParseImageMapping parses an --image-map value, IMAGE=BINARY: the image
// (repo:tag, repo@digest, or repo:* for every tag of repo) that a provider
// object names, and the local binary that runs instead. A relative binary
// path is taken from the working directory. Image references contain no
// "=", so the first one separates the two.
func ParseImageMapping(s string) (process.ImageMapping, error) {
	image, binary, ok := strings.Cut(s, "=")
	if !ok || image == "" || binary == "" {
		return process.ImageMapping{}, fmt.Errorf("--image-map %q: want IMAGE=BINARY, e.g. registry.invalid/acme/my-provider:v1=./bin/my-provider", s)
	}
	abs, err := filepath.Abs(binary)
	if err != nil {
		return process.ImageMapping{}, fmt.Errorf("--image-map %q: %w", s, err)
	}
	return process.ImageMapping{Image: image, Binary: abs}, nil
}

// UserImages returns the image map entries of the --image-map values and
// the --image-map-file files (read with process.LoadImageMap, the format of
// the operator's --image-map), in that order. It checks what a provider
// would otherwise only find at its start: that each entry is well formed,
// no image is mapped twice, and each binary is an executable file.
func UserImages(mappings, files []string) ([]process.ImageMapping, error) {
	var out []process.ImageMapping
	for _, s := range mappings {
		m, err := ParseImageMapping(s)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	for _, f := range files {
		m, err := process.LoadImageMap(f)
		if err != nil {
			return nil, err
		}
		out = append(out, m.Images...)
	}
	if err := (process.ImageMap{Images: out, Source: "of --image-map and --image-map-file"}).Validate(); err != nil {
		return nil, err
	}
	var errs []error
	for _, m := range out {
		fi, err := os.Stat(m.Binary)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("image %s: binary: %w", m.Image, err))
		case fi.IsDir() || fi.Mode()&0o111 == 0:
			errs = append(errs, fmt.Errorf("image %s: binary %s is not an executable file", m.Image, m.Binary))
		}
	}
	return out, errors.Join(errs...)
}

// isGeneratedImage reports whether an image map entry is one WriteImageMap
// writes for the binaries of the bin directory.
func isGeneratedImage(m process.ImageMapping) bool {
	return strings.HasPrefix(m.Image, ImageRegistry+"/")
}

// recordedUserImages returns the entries of an earlier run's image map that
// the user added (not the generated ones), so that a resumed landscape
// keeps running the user's providers without the flags being given again.
func recordedUserImages(path string) []process.ImageMapping {
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	m, err := process.LoadImageMap(path)
	if err != nil {
		return nil
	}
	var out []process.ImageMapping
	for _, e := range m.Images {
		if !isGeneratedImage(e) {
			out = append(out, e)
		}
	}
	return out
}
