package console

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// bucket is one bucket of a histogram: the count of observations at most
// Le (cumulative, as Prometheus exposes it).
type bucket struct {
	Le    float64
	Count float64
}

// histogram is a Prometheus histogram summed over its label sets.
type histogram struct {
	Buckets []bucket // sorted by Le, +Inf last
	Count   float64
	Sum     float64
}

// errMetricNotFound says that the endpoint does not expose the histogram.
var errMetricNotFound = errors.New("the endpoint exposes no such histogram")

// parseHistogram reads the histogram name from Prometheus' text exposition
// format, summing the series of every label set bucket by bucket.
func parseHistogram(r io.Reader, name string) (*histogram, error) {
	byLe := map[float64]float64{}
	h := &histogram{}
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := splitSample(line)
		if !ok {
			continue
		}
		metric, labels, _ := strings.Cut(series, "{")
		switch metric {
		case name + "_bucket":
			le, ok := labelValue(labels, "le")
			if !ok {
				continue
			}
			bound, err := strconv.ParseFloat(le, 64)
			if err != nil {
				continue
			}
			byLe[bound] += value
			found = true
		case name + "_count":
			h.Count += value
			found = true
		case name + "_sum":
			h.Sum += value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	if !found {
		return nil, errMetricNotFound
	}
	for le, c := range byLe {
		h.Buckets = append(h.Buckets, bucket{Le: le, Count: c})
	}
	sort.Slice(h.Buckets, func(i, j int) bool { return h.Buckets[i].Le < h.Buckets[j].Le })
	return h, nil
}

// splitSample splits `series value [timestamp]`; the series may hold
// spaces inside quoted label values.
func splitSample(line string) (string, float64, bool) {
	end := strings.LastIndex(line, "}")
	if end < 0 {
		end = strings.IndexAny(line, " \t")
		if end < 0 {
			return "", 0, false
		}
		end--
	}
	series := line[:end+1]
	f := strings.Fields(line[end+1:])
	if len(f) == 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "", 0, false
	}
	return series, v, true
}

// labelValue returns the value of label key in `a="x",key="y"}` (the
// label set after its opening brace).
func labelValue(labels, key string) (string, bool) {
	labels = "{" + labels
	i := strings.Index(labels, "{"+key+`="`)
	if i < 0 {
		i = strings.Index(labels, ","+key+`="`)
	}
	if i < 0 {
		return "", false
	}
	rest := labels[i+len(key)+3:]
	end := strings.IndexByte(rest, '"')
	if end < 0 {
		return "", false
	}
	return rest[:end], true
}

// metricsClient is the client of the metrics endpoint: its own TLS trust,
// no credentials (each request adds the user's token).
func metricsClient(raw string, caData []byte, timeout time.Duration) (*http.Client, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("console: metrics URL %q is not an http(s) URL", raw)
	}
	if u.User != nil {
		return nil, errors.New("console: the metrics URL must not carry credentials")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caData) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caData) {
			return nil, errors.New("console: the metrics CA holds no PEM certificate")
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // never carry the token elsewhere
	}}, nil
}

// errMetricsForbidden says the endpoint refused the user's token.
var errMetricsForbidden = errors.New("not permitted")

// fetchHistogram scrapes the metrics endpoint with the user's token.
func (s *Server) fetchHistogram(ctx context.Context, token string) (*histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.opts.MetricsURL, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.metrics.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is configuration; the message needs only the cause
		}
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, errMetricsForbidden
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("scrape metrics: status %d", resp.StatusCode)
	}
	return parseHistogram(io.LimitReader(resp.Body, 16<<20), s.opts.LatencyMetric)
}

// histogramChart is the SVG of a histogram: one bar per bucket with the
// observations that fell into it (not cumulative).
type histogramChart struct {
	Width, Height int
	Bars          []histBar
	Count         float64
	Mean          string
	AxisY         int
}

type histBar struct {
	X, Y, W, H int
	Label      string
	Count      string
	LabelX     int
	LabelY     int
}

func newHistogramChart(h *histogram) *histogramChart {
	const (
		plotH  = 160
		top    = 10
		barW   = 46
		gap    = 6
		labelH = 40
	)
	c := &histogramChart{Count: h.Count, AxisY: top + plotH}
	if h.Count > 0 {
		c.Mean = formatSeconds(h.Sum / h.Count)
	}
	prev := 0.0
	maxCount := 0.0
	counts := make([]float64, len(h.Buckets))
	for i, b := range h.Buckets {
		counts[i] = math.Max(0, b.Count-prev)
		prev = b.Count
		maxCount = math.Max(maxCount, counts[i])
	}
	for i, b := range h.Buckets {
		hgt := 0
		if maxCount > 0 {
			hgt = int(math.Round(counts[i] / maxCount * plotH))
		}
		x := 10 + i*(barW+gap)
		label := "≤" + formatSeconds(b.Le)
		if math.IsInf(b.Le, 1) {
			label = "more"
		}
		c.Bars = append(c.Bars, histBar{
			X: x, Y: top + plotH - hgt, W: barW, H: hgt,
			Label: label, Count: strconv.FormatFloat(counts[i], 'f', -1, 64),
			LabelX: x + barW/2, LabelY: top + plotH + 14,
		})
	}
	c.Width = 20 + len(h.Buckets)*(barW+gap)
	c.Height = top + plotH + labelH
	return c
}

// formatSeconds prints a duration in seconds compactly (5ms, 1.3s).
func formatSeconds(s float64) string {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return "∞"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return strconv.FormatFloat(s*1e6, 'f', 0, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(s*1e3, 'g', 3, 64) + "ms"
	default:
		return strconv.FormatFloat(s, 'g', 3, 64) + "s"
	}
}
