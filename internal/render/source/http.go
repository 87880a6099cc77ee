package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// cached is one http(s) body in the cache.
type cached struct {
	body         []byte
	etag         string
	lastModified string
	fetched      time.Time
}

func (f *Fetcher) fetchHTTP(ctx context.Context, u *url.URL, maxBytes int64) ([]byte, error) {
	key := u.String()
	prev, ok := f.cache.Get(key)
	if ok && f.fresh(prev) {
		return checkSize(prev.body, maxBytes)
	}
	// Concurrent fetches of one URL share a request. The shared request
	// downloads up to the largest limit a caller may ask for, which is the
	// limit of this call: the size is checked per caller below.
	v, err, _ := f.group.Do(fmt.Sprintf("%d\x00%s", maxBytes, key), func() (any, error) {
		// A caller that missed the cache just before a shared request
		// finished finds that request's body here instead of asking again.
		if c, hit := f.cache.Get(key); hit && f.fresh(c) {
			return c, nil
		}
		return f.download(ctx, key, prev, maxBytes)
	})
	if err != nil {
		// A server that is down for a moment must not fail every instance
		// of a plan: serve the last good copy until the server answers.
		if ok && IsTransient(err) {
			return checkSize(prev.body, maxBytes)
		}
		return nil, err
	}
	return checkSize(v.(*cached).body, maxBytes)
}

// fresh reports whether c may be served without asking the server again.
func (f *Fetcher) fresh(c *cached) bool {
	return f.ttl > 0 && f.now().Sub(c.fetched) < f.ttl
}

func checkSize(body []byte, maxBytes int64) ([]byte, error) {
	if int64(len(body)) > maxBytes {
		return nil, &Error{Err: tooLarge(maxBytes)}
	}
	return body, nil
}

// download fetches key, revalidating prev when there is one.
func (f *Fetcher) download(ctx context.Context, key string, prev *cached, maxBytes int64) (*cached, error) {
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, key, nil)
	if err != nil {
		return nil, &Error{Err: err}
	}
	if prev != nil {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		}
		if prev.lastModified != "" {
			req.Header.Set("If-Modified-Since", prev.lastModified)
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		// The url.Error names the full URL, query included: keep only its
		// cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &Error{Transient: true, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()

	switch {
	case resp.StatusCode == http.StatusNotModified && prev != nil:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		refreshed := *prev
		refreshed.fetched = f.now()
		f.store(key, &refreshed)
		return &refreshed, nil
	case resp.StatusCode != http.StatusOK:
		transient := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		return nil, &Error{Transient: transient, Err: fmt.Errorf("HTTP %s", resp.Status)}
	}
	if resp.ContentLength > maxBytes {
		return nil, &Error{Err: tooLarge(maxBytes)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, &Error{Transient: true, Err: fmt.Errorf("read body: %w", err)}
	}
	if int64(len(body)) > maxBytes {
		return nil, &Error{Err: tooLarge(maxBytes)}
	}
	c := &cached{
		body:         body,
		etag:         resp.Header.Get("ETag"),
		lastModified: resp.Header.Get("Last-Modified"),
		fetched:      f.now(),
	}
	f.store(key, c)
	return c, nil
}

func (f *Fetcher) store(key string, c *cached) {
	if f.ttl <= 0 {
		return
	}
	f.cache.Add(key, c, int64(len(c.body)))
}
