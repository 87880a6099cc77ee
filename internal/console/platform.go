package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// providerRow is one ServiceProvider and its health.
type providerRow struct {
	Name, Image, Phase, Ready, Reason, Message string
}

// capacityBar is one bar of the capacity chart: used of total.
type capacityBar struct {
	Label     string
	Text      string
	Y         int
	Width     int // of the used part, out of barWidth
	Over      bool
	Known     bool
	TextY     int
	BarHeight int
}

// clusterChart is one SFCluster in the capacity chart.
type clusterChart struct {
	Name, Namespace, Ready, Reason string
	Instances                      int32
	Unschedulable                  bool
	Bars                           []capacityBar
	Height                         int
}

type platformData struct {
	Providers          []providerRow
	ProvidersForbidden bool
	ProvidersError     string

	Clusters          []clusterChart
	ClustersForbidden bool
	ClustersError     string

	LatencyConfigured bool
	LatencyMetric     string
	Latency           *histogramChart
	LatencyForbidden  bool
	LatencyError      string

	// Separate: the platform cluster is not the onboarding cluster, and
	// its view takes a sign-in of its own (PlatformUser once done).
	Separate     bool
	PlatformUser string
	LoginError   string
}

// Geometry of the capacity chart (pixels).
const (
	barWidth  = 300
	barHeight = 16
	barStep   = 24
	barLeft   = 110
)

// platformPage shows what the user's credentials may read of the platform:
// each section on its own, "not permitted" where the API server (or the
// metrics endpoint) refuses the token.
func (s *Server) platformPage(w http.ResponseWriter, r *http.Request, sess *session) {
	s.renderPlatform(w, r, sess, http.StatusOK, "")
}

// renderPlatform renders the platform view with status, and loginError
// next to the platform sign-in.
func (s *Server) renderPlatform(w http.ResponseWriter, r *http.Request, sess *session, status int, loginError string) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	d := platformData{LatencyConfigured: s.opts.MetricsURL != "", LatencyMetric: s.opts.LatencyMetric, Separate: s.platformSeparate(), LoginError: loginError}
	platform, platformUser := s.platformClient(sess)
	d.PlatformUser = platformUser
	refused := false
	sectionErr := func(what string, err error) (bool, string) {
		if apierrors.IsUnauthorized(err) {
			// An expired or revoked platform token ends the platform
			// sign-in: the form comes back.
			sess.setPlatform(nil)
			d.PlatformUser = ""
			refused = true
			return false, platformUnauthorized(d.Separate)
		}
		return sectionError(what, err)
	}

	sps, err := platform.Resource(serviceProviderGVR).List(ctx, metav1.ListOptions{})
	d.ProvidersForbidden, d.ProvidersError = sectionErr("list ServiceProviders", err)
	if err == nil {
		for i := range sps.Items {
			var sp providerv1alpha1.ServiceProvider
			if err := fromUnstructured(&sps.Items[i], &sp); err != nil {
				continue
			}
			row := providerRow{Name: sp.Name, Image: sp.Spec.Image, Phase: string(sp.Status.Phase), Ready: "Unknown"}
			for _, c := range sp.Status.Conditions {
				if c.Type == "Ready" {
					row.Ready, row.Reason, row.Message = string(c.Status), c.Reason, c.Message
				}
			}
			d.Providers = append(d.Providers, row)
		}
	}

	cls, err := platform.Resource(sfClustersGVR).List(ctx, metav1.ListOptions{})
	d.ClustersForbidden, d.ClustersError = sectionErr("list SFClusters", err)
	if err == nil {
		for i := range cls.Items {
			var c resourcev1alpha1.SFCluster
			if err := fromUnstructured(&cls.Items[i], &c); err != nil {
				continue
			}
			d.Clusters = append(d.Clusters, capacityChart(&c))
		}
		sort.Slice(d.Clusters, func(i, j int) bool {
			if d.Clusters[i].Namespace != d.Clusters[j].Namespace {
				return d.Clusters[i].Namespace < d.Clusters[j].Namespace
			}
			return d.Clusters[i].Name < d.Clusters[j].Name
		})
	}

	if refused {
		// The API server caches a token's authentication for a few
		// seconds, so one list may pass while the next is refused: once
		// any is refused, nothing read with that token is shown.
		msg := platformUnauthorized(d.Separate)
		d.Providers, d.ProvidersForbidden, d.ProvidersError = nil, false, msg
		d.Clusters, d.ClustersForbidden, d.ClustersError = nil, false, msg
	}

	if d.LatencyConfigured {
		h, err := s.fetchHistogram(ctx, sess.token)
		switch {
		case errors.Is(err, errMetricsForbidden):
			d.LatencyForbidden = true
		case err != nil:
			d.LatencyError = err.Error()
		default:
			d.Latency = newHistogramChart(h)
		}
	}
	s.render(w, status, "platform", sess, "platform", "Platform", d)
}

func sectionError(what string, err error) (bool, string) {
	switch {
	case err == nil:
		return false, ""
	case apierrors.IsForbidden(err):
		return true, ""
	default:
		return false, describeError(what, err).Message
	}
}

// capacity returns what the scheduler counts as the SFCluster's capacity
// (docs/multicluster.md): spec.totalCapacity, else status.totalCapacity,
// else status.currentCapacity, times schedulingLimitPercentage.
func capacity(c *resourcev1alpha1.SFCluster) corev1.ResourceList {
	list := c.Spec.TotalCapacity
	if len(list) == 0 {
		list = c.Status.TotalCapacity
	}
	if len(list) == 0 {
		list = c.Status.CurrentCapacity
	}
	return list
}

// capacityChart draws, for one SFCluster, a bar of its instances against
// the instances it can take at the current mix (its instances times the
// tightest capacity/requests ratio), and one bar per resource of its
// capacity (requests of the placed instances against the capacity).
func capacityChart(c *resourcev1alpha1.SFCluster) clusterChart {
	cc := clusterChart{Name: c.Name, Namespace: c.Namespace, Instances: c.Status.ServiceInstanceCount, Unschedulable: c.Spec.Unschedulable, Ready: "Unknown"}
	for _, cond := range c.Status.Conditions {
		if cond.Type == resourcev1alpha1.SFClusterConditionReady {
			cc.Ready, cc.Reason = string(cond.Status), cond.Reason
		}
	}
	limit := float64(c.Spec.SchedulingLimitPercentage)
	if limit <= 0 {
		limit = 100
	}
	capList := capacity(c)
	names := make([]string, 0, len(capList))
	for n := range capList {
		names = append(names, string(n))
	}
	sort.Strings(names)

	// The instance bar: how many instances fit at the current mix.
	instBar := capacityBar{Label: "instances"}
	ratio := math.Inf(1)
	for _, n := range names {
		total := capList[corev1.ResourceName(n)]
		req, ok := c.Status.Requests[corev1.ResourceName(n)]
		if !ok || req.IsZero() {
			continue
		}
		ratio = math.Min(ratio, total.AsApproximateFloat64()*limit/100/req.AsApproximateFloat64())
	}
	if cc.Instances > 0 && !math.IsInf(ratio, 1) {
		fit := math.Floor(float64(cc.Instances) * ratio)
		instBar.Known = true
		instBar.Text = fmt.Sprintf("%d of %.0f", cc.Instances, fit)
		instBar.Width, instBar.Over = fraction(float64(cc.Instances), fit)
	} else {
		instBar.Text = fmt.Sprintf("%d (capacity unknown)", cc.Instances)
	}
	cc.Bars = append(cc.Bars, instBar)

	for _, n := range names {
		total := capList[corev1.ResourceName(n)]
		t := total.AsApproximateFloat64() * limit / 100
		used := c.Status.Requests[corev1.ResourceName(n)]
		b := capacityBar{Label: n, Known: t > 0}
		b.Width, b.Over = fraction(used.AsApproximateFloat64(), t)
		b.Text = fmt.Sprintf("%s of %s", used.String(), total.String())
		if limit != 100 {
			b.Text += fmt.Sprintf(" (limit %.0f%%)", limit)
		}
		cc.Bars = append(cc.Bars, b)
	}
	for i := range cc.Bars {
		cc.Bars[i].Y = 4 + i*barStep
		cc.Bars[i].TextY = cc.Bars[i].Y + barHeight - 3
		cc.Bars[i].BarHeight = barHeight
	}
	cc.Height = 8 + len(cc.Bars)*barStep
	return cc
}

// fraction returns the width of used out of total in pixels, capped at
// the bar, and whether used exceeds total.
func fraction(used, total float64) (int, bool) {
	if total <= 0 {
		return 0, used > 0
	}
	f := used / total
	return int(math.Round(math.Min(f, 1) * barWidth)), f > 1
}
