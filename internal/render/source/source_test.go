package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// server serves fixed paths and counts requests and conditional requests.
type server struct {
	*httptest.Server
	hits        atomic.Int64
	conditional atomic.Int64
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if r.Header.Get("If-None-Match") == `"v1"` {
			s.conditional.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte("hello"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	})
	mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		for range 10 {
			_, _ = w.Write([]byte(strings.Repeat("x", 10)))
			w.(http.Flusher).Flush() // no Content-Length: the limit must hold while reading
		}
	})
	mux.HandleFunc("/flaky", func(w http.ResponseWriter, r *http.Request) {
		if s.hits.Add(1) == 1 {
			_, _ = w.Write([]byte("first"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		<-r.Context().Done()
	})
	mux.HandleFunc("/error", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func TestFetchHTTP(t *testing.T) {
	cases := map[string]struct {
		path          string
		max           int64
		want          string
		wantErr       string
		wantTransient bool
	}{
		"Body":                {path: "/ok", max: 10, want: "hello"},
		"NotFound":            {path: "/missing", max: 10, wantErr: "HTTP 404 Not Found"},
		"ServerError":         {path: "/error", max: 10, wantErr: "HTTP 500", wantTransient: true},
		"TooLarge":            {path: "/big", max: 99, wantErr: "larger than the size limit of 99 bytes"},
		"TooLargeUnannounced": {path: "/big-chunked", max: 99, wantErr: "larger than the size limit of 99 bytes"},
		"AtTheLimit":          {path: "/big", max: 100, want: strings.Repeat("x", 100)},
		"Timeout":             {path: "/slow", max: 10, wantErr: "deadline exceeded", wantTransient: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			// Only /slow must run into the timeout; the others get one a
			// loaded machine cannot exceed (100 ms was, at load average 14).
			timeout := time.Minute
			if tc.path == "/slow" {
				timeout = 100 * time.Millisecond
			}
			f := New(WithHTTPTimeout(timeout))
			got, err := f.Fetch(context.Background(), s.URL+tc.path, tc.max)
			checkErr(t, err, tc.wantErr, tc.wantTransient)
			if string(got) != tc.want {
				t.Errorf("body = %q, want %q", got, tc.want)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string, transient bool) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want it to contain %q", err, want)
	}
	if got := IsTransient(err); got != transient {
		t.Errorf("IsTransient = %v, want %v (%v)", got, transient, err)
	}
}

func TestFetchHTTPCache(t *testing.T) {
	s := newServer(t)
	f := New(WithCacheTTL(time.Minute))
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }

	for i := range 3 {
		got, err := f.Fetch(context.Background(), s.URL+"/ok", 10)
		if err != nil || string(got) != "hello" {
			t.Fatalf("fetch %d: %q, %v", i, got, err)
		}
	}
	if n := s.hits.Load(); n != 1 {
		t.Errorf("server saw %d requests within the TTL, want 1", n)
	}

	now = now.Add(2 * time.Minute)
	got, err := f.Fetch(context.Background(), s.URL+"/ok", 10)
	if err != nil || string(got) != "hello" {
		t.Fatalf("revalidated fetch: %q, %v", got, err)
	}
	if n, c := s.hits.Load(), s.conditional.Load(); n != 2 || c != 1 {
		t.Errorf("after the TTL: %d requests, %d conditional; want 2 and 1 (a 304 revalidation)", n, c)
	}
	if _, err := f.Fetch(context.Background(), s.URL+"/ok", 10); err != nil || s.hits.Load() != 2 {
		t.Errorf("the 304 must restart the TTL: %d requests, %v", s.hits.Load(), err)
	}

	// A cached body is still checked against the limit of each caller.
	if _, err := f.Fetch(context.Background(), s.URL+"/ok", 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("cached body over a smaller limit: error %v, want ErrTooLarge", err)
	}
}

func TestFetchHTTPStaleOnTransientError(t *testing.T) {
	s := newServer(t)
	f := New()
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	if got, err := f.Fetch(context.Background(), s.URL+"/flaky", 10); err != nil || string(got) != "first" {
		t.Fatalf("first fetch: %q, %v", got, err)
	}
	now = now.Add(time.Hour)
	got, err := f.Fetch(context.Background(), s.URL+"/flaky", 10)
	if err != nil || string(got) != "first" {
		t.Errorf("a 503 on revalidation must serve the stale copy: %q, %v", got, err)
	}
	if s.hits.Load() != 2 {
		t.Errorf("server saw %d requests, want 2", s.hits.Load())
	}
}

func TestFetchHTTPCacheDisabled(t *testing.T) {
	s := newServer(t)
	f := New(WithCacheTTL(0))
	for range 2 {
		if _, err := f.Fetch(context.Background(), s.URL+"/ok", 10); err != nil {
			t.Fatal(err)
		}
	}
	if s.hits.Load() != 2 {
		t.Errorf("server saw %d requests with caching off, want 2", s.hits.Load())
	}
}

func TestFetchRedactsURL(t *testing.T) {
	s := newServer(t)
	u := strings.Replace(s.URL, "http://", "http://user:secret@", 1) + "/missing?token=secret"
	_, err := New().Fetch(context.Background(), u, 10)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %v must not show user information or query", err)
	}
	if !strings.Contains(err.Error(), "/missing") {
		t.Errorf("error %v must name the URL's path", err)
	}
}

func TestFetchFile(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	write := func(dir, name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inside := write(root, "tpl.yaml", "kind: X")
	secret := write(outside, "token", "secret")
	if err := os.Symlink(secret, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	write(root, "big", strings.Repeat("x", 20))

	cases := map[string]struct {
		opts    []Option
		url     string
		want    string
		wantErr string
	}{
		"InsideRoot":     {opts: []Option{WithFileRoots(root)}, url: "file://" + inside, want: "kind: X"},
		"Localhost":      {opts: []Option{WithFileRoots(root)}, url: "file://localhost" + inside, want: "kind: X"},
		"Disabled":       {url: "file://" + inside, wantErr: "file URLs are disabled"},
		"OutsideRoot":    {opts: []Option{WithFileRoots(root)}, url: "file://" + secret, wantErr: "outside the directories"},
		"SymlinkEscapes": {opts: []Option{WithFileRoots(root)}, url: "file://" + filepath.Join(root, "escape"), wantErr: "outside the directories"},
		"DotDot":         {opts: []Option{WithFileRoots(root)}, url: "file://" + root + "/../" + filepath.Base(outside) + "/token", wantErr: "outside the directories"},
		"Relative":       {opts: []Option{WithFileRoots(root)}, url: "file://tpl.yaml", wantErr: "names host"},
		"Missing":        {opts: []Option{WithFileRoots(root)}, url: "file://" + root + "/nope", wantErr: "no such file"},
		"Directory":      {opts: []Option{WithFileRoots(root)}, url: "file://" + root, wantErr: "not a regular file"},
		"TooLarge":       {opts: []Option{WithFileRoots(root)}, url: "file://" + root + "/big", wantErr: "larger than the size limit"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := New(tc.opts...).Fetch(context.Background(), tc.url, 10)
			checkErr(t, err, tc.wantErr, false)
			if string(got) != tc.want {
				t.Errorf("body = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFetchConfigMap(t *testing.T) {
	getter := ConfigMapGetterFunc(func(_ context.Context, namespace, name string) (*corev1.ConfigMap, error) {
		switch namespace + "/" + name {
		case "ns/templates":
			return &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
				Data:       map[string]string{"provision.yaml": "kind: X", "big": strings.Repeat("x", 20)},
				BinaryData: map[string][]byte{"chart.tgz": {0x1f, 0x8b, 0x00, 0xff}},
			}, nil
		case "ns/broken":
			return nil, errors.New("connection refused")
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	})
	cases := map[string]struct {
		opts          []Option
		url           string
		want          string
		wantErr       string
		wantTransient bool
	}{
		"Data":       {url: "configmap://ns/templates/provision.yaml", want: "kind: X"},
		"BinaryData": {url: "configmap://ns/templates/chart.tgz", want: "\x1f\x8b\x00\xff"},
		"MissingKey": {url: "configmap://ns/templates/nope", wantErr: `has no key "nope"`},
		"NotFound":   {url: "configmap://ns/nope/key", wantErr: "ConfigMap ns/nope not found"},
		"ReadFails":  {url: "configmap://ns/broken/key", wantErr: "connection refused", wantTransient: true},
		"Malformed":  {url: "configmap://ns/templates", wantErr: "configmap://<namespace>/<name>/<key>"},
		"TooLarge":   {url: "configmap://ns/templates/big", wantErr: "larger than the size limit"},
		"Disabled":   {opts: []Option{WithConfigMapGetter(nil)}, url: "configmap://ns/templates/provision.yaml", wantErr: "configmap URLs are disabled"},
		"BadScheme":  {url: "ftp://host/x", wantErr: `unsupported scheme "ftp"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := append([]Option{WithConfigMapGetter(getter)}, tc.opts...)
			got, err := New(opts...).Fetch(context.Background(), tc.url, 10)
			checkErr(t, err, tc.wantErr, tc.wantTransient)
			if string(got) != tc.want {
				t.Errorf("body = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFetchHTTPSharesConcurrentRequests(t *testing.T) {
	release := make(chan struct{})
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		<-release
		_, _ = w.Write([]byte("body"))
	}))
	t.Cleanup(srv.Close)
	f := New()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := f.Fetch(context.Background(), srv.URL, 10)
			errs <- err
		}()
	}
	// Let the first request reach the server before releasing it; the others
	// either join it or find the cached body.
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return hits.Load() > 0, nil }); err != nil {
		t.Fatal("no request reached the server")
	}
	close(release)
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("server saw %d requests for 8 concurrent fetches, want 1", n)
	}
}
