// Package externalmetrics serves each worker version's Temporal backlog
// through the Kubernetes external metrics API (external.metrics.k8s.io),
// so that a HorizontalPodAutoscaler can scale a version on its own backlog
// without an adapter. The API server reaches it through an APIService (the
// aggregation layer), which names the manager's webhook Service; requests
// come through the API server's front proxy, whose client certificate is
// checked against the request-header CA the API server publishes, and each
// one is authorized with a SubjectAccessReview for the user it carries.
//
// Metrics, each a single value per request, over the running versions
// whose labels the request's selector matches:
//
//   - temporal_backlog_count: tasks waiting, summed over task queues and
//     versions;
//   - temporal_backlog_age_seconds: the age of the oldest waiting task.
//
// Labels a selector may use: temporal.io/worker-deployment (the TWD's name,
// as on its Deployments), temporal.io/build-id, temporal.io/task-queue and
// temporal.io/task-queue-type (Workflow, Activity, Nexus). A selector that
// matches no running version gets an empty list, which the HPA reports as
// an error rather than scaling on a zero it cannot trust.
package externalmetrics

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	external "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rainbow-deploy/rainbow/internal/backlog"
)

const (
	// Group and Version of the API.
	Group   = "external.metrics.k8s.io"
	Version = "v1beta1"
	// APIServiceName is the APIService that registers the API.
	APIServiceName = Version + "." + Group

	MetricBacklogCount = "temporal_backlog_count"
	MetricBacklogAge   = "temporal_backlog_age_seconds"
)

// Paths the server answers on the manager's webhook server.
const (
	PathAPIs     = "/apis"
	PathGroup    = "/apis/" + Group
	PathVersion  = PathGroup + "/" + Version
	PathSubtree  = PathVersion + "/"
	groupVersion = Group + "/" + Version
)

var metricNames = []string{MetricBacklogCount, MetricBacklogAge}

// Source gives the backlog samples of the running versions in a namespace
// (backlog.Backlogs).
type Source interface {
	Values(ctx context.Context, namespace string, selector labels.Selector) ([]backlog.Sample, int, error)
}

// Server is the external metrics API's HTTP handler.
type Server struct {
	Source Source
	// Auth checks who is asking; nil lets every request through (tests).
	Auth *FrontProxyAuth
	mux  *http.ServeMux
}

// NewServer answers with src, authenticating and authorizing with auth.
func NewServer(src Source, auth *FrontProxyAuth) *Server {
	s := &Server{Source: src, Auth: auth, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET "+PathAPIs, s.discovery(apiGroupList()))
	s.mux.HandleFunc("GET "+PathGroup, s.discovery(apiGroup()))
	s.mux.HandleFunc("GET "+PathVersion, s.discovery(apiResourceList()))
	s.mux.HandleFunc("GET "+PathSubtree+"namespaces/{namespace}/{metric}", s.metric)
	return s
}

// Paths are the paths to register the server on.
func (s *Server) Paths() []string { return []string{PathAPIs, PathGroup, PathVersion, PathSubtree} }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

func (s *Server) discovery(body any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.Auth.authenticate(r); err != nil {
			writeStatus(w, http.StatusUnauthorized, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, body)
	}
}

func (s *Server) metric(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("metric")
	u, err := s.Auth.authenticate(r)
	if err != nil {
		writeStatus(w, http.StatusUnauthorized, err.Error())
		return
	}
	if err := s.Auth.authorize(r.Context(), u, ns, name); err != nil {
		writeStatus(w, http.StatusForbidden, err.Error())
		return
	}
	if !slices.Contains(metricNames, name) {
		writeStatus(w, http.StatusNotFound, fmt.Sprintf("no metric %q: this server serves %s", name, strings.Join(metricNames, ", ")))
		return
	}
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "labelSelector: "+err.Error())
		return
	}
	samples, versions, err := s.Source.Values(r.Context(), ns, sel)
	if err != nil {
		logf.FromContext(r.Context()).Info("external metric unavailable", "namespace", ns, "metric", name, "selector", sel.String(), "error", err.Error())
		writeStatus(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	list := external.ExternalMetricValueList{TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: groupVersion},
		Items: []external.ExternalMetricValue{}}
	if versions > 0 {
		list.Items = append(list.Items, aggregate(name, sel, samples))
	}
	writeJSON(w, http.StatusOK, list)
}

// aggregate makes the metric's one value: the sum of the counts, or the
// oldest age; timed by the oldest read.
func aggregate(name string, sel labels.Selector, samples []backlog.Sample) external.ExternalMetricValue {
	v := external.ExternalMetricValue{MetricName: name, MetricLabels: selectedLabels(sel)}
	var count int64
	var age time.Duration
	var at time.Time
	for _, s := range samples {
		count += s.Count
		age = max(age, s.Age)
		if at.IsZero() || s.At.Before(at) {
			at = s.At
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	v.Timestamp = metav1.NewTime(at)
	if name == MetricBacklogAge {
		v.Value = *resource.NewMilliQuantity(age.Milliseconds(), resource.DecimalSI)
	} else {
		v.Value = *resource.NewQuantity(count, resource.DecimalSI)
	}
	return v
}

// selectedLabels are the selector's equality requirements: what every
// summed sample shares.
func selectedLabels(sel labels.Selector) map[string]string {
	out := map[string]string{}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if v, ok := r.Values().PopAny(); ok && r.Values().Len() == 1 && (r.Operator() == "=" || r.Operator() == "==" || r.Operator() == "in") {
			out[r.Key()] = v
		}
	}
	return out
}

func apiGroupList() metav1.APIGroupList {
	return metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{apiGroup()}}
}

func apiGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: groupVersion, Version: Version}
	return metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: Group,
		Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

func apiResourceList() metav1.APIResourceList {
	l := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: groupVersion}
	for _, m := range metricNames {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: m, Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}})
	}
	return l
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// writeStatus answers with a metav1.Status, as the API server does.
func writeStatus(w http.ResponseWriter, code int, msg string) {
	reasons := map[int]metav1.StatusReason{
		http.StatusBadRequest: metav1.StatusReasonBadRequest, http.StatusUnauthorized: metav1.StatusReasonUnauthorized,
		http.StatusForbidden: metav1.StatusReasonForbidden, http.StatusNotFound: metav1.StatusReasonNotFound,
		http.StatusServiceUnavailable: metav1.StatusReasonServiceUnavailable,
	}
	writeJSON(w, code, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reasons[code], Code: int32(code)})
}
