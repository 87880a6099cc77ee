package source

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

func (f *Fetcher) fetchFile(u *url.URL, maxBytes int64) ([]byte, error) {
	if len(f.fileRoots) == 0 {
		return nil, &Error{Err: errors.New("file URLs are disabled: the operator was not given directories to read templates from")}
	}
	if u.Host != "" && u.Host != "localhost" {
		return nil, &Error{Err: fmt.Errorf("file URL names host %q: use file:///absolute/path", u.Host)}
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return nil, &Error{Err: errors.New("file URL needs an absolute path: file:///absolute/path")}
	}
	path, err := filepath.EvalSymlinks(filepath.Clean(u.Path))
	if err != nil {
		return nil, &Error{Err: fileError(err)}
	}
	if !f.allowedFile(path) {
		return nil, &Error{Err: fmt.Errorf("%s is outside the directories templates may be read from", u.Path)}
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, &Error{Err: fileError(err)}
	}
	defer func() { _ = file.Close() }()
	info, err := file.Stat()
	if err != nil {
		return nil, &Error{Err: fileError(err)}
	}
	if !info.Mode().IsRegular() {
		return nil, &Error{Err: errors.New("not a regular file")}
	}
	if info.Size() > maxBytes {
		return nil, &Error{Err: tooLarge(maxBytes)}
	}
	body, err := io.ReadAll(io.LimitReader(file, maxBytes+1))
	if err != nil {
		return nil, &Error{Err: fileError(err)}
	}
	if int64(len(body)) > maxBytes {
		return nil, &Error{Err: tooLarge(maxBytes)}
	}
	return body, nil
}

// allowedFile reports whether path, with symbolic links resolved, lies in
// one of the file roots.
func (f *Fetcher) allowedFile(path string) bool {
	for _, root := range f.fileRoots {
		resolved, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(resolved, path)
		if err != nil {
			continue
		}
		if rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// fileError drops the path from an *os.PathError: the caller names the URL.
func fileError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
