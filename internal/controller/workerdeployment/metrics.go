package workerdeployment

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

var (
	rollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rainbow_rollouts_total",
		Help: "Rollouts that ended, by outcome: complete (the target became current) or blocked (by the reason that stopped it).",
	}, []string{"outcome"})
	rolloutDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rainbow_rollout_duration_seconds",
		Help:    "Time from the start of a rollout (Progressing turned True) to its target becoming current.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 16),
	})
	rampPercentage = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rainbow_ramp_percentage",
		Help: "Share of new workflows ramped to the target version, 0 when nothing ramps.",
	}, []string{"namespace", "name"})
	versionsByStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rainbow_versions",
		Help: "Versions of each TemporalWorkerDeployment by status.",
	}, []string{"namespace", "name", "status"})
	workersRevived = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rainbow_workers_revived_total",
		Help: "Versions given one worker back after someone else (an autoscaler, a person) scaled them to zero while work waited for them.",
	}, []string{"namespace", "name"})
	rolloutsStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rainbow_rollouts_started_total",
		Help: "Rollouts that started: Progressing turned True.",
	})
	// A gauge, not only the counter: an alert needs to know a rollout is
	// still blocked, and which one.
	rolloutBlocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rainbow_rollout_blocked",
		Help: "1 while a TemporalWorkerDeployment's rollout is blocked until a person acts, with the Progressing condition's reason (RolloutAborted after an abort); no series otherwise.",
	}, []string{"namespace", "name", "reason"})
	drainingSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rainbow_version_draining_since_timestamp_seconds",
		Help: "When each draining version stopped being current or ramping, by Temporal's clock (Unix seconds); no series for other versions.",
	}, []string{"namespace", "name", "build_id"})
	drainDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rainbow_version_drain_duration_seconds",
		Help:    "Time versions took to drain: from losing their traffic to Temporal reporting them drained.",
		Buckets: prometheus.ExponentialBuckets(60, 2, 16),
	})
)

func init() {
	metrics.Registry.MustRegister(rollouts, rolloutDuration, rampPercentage, versionsByStatus, workersRevived,
		rolloutsStarted, rolloutBlocked, drainingSince, drainDuration)
}

// blockedReasons is the reason each TWD's rollout_blocked series carries,
// so a pass replaces a changed one without dropping the series it keeps
// (a scrape in between would reset an alert's "for").
var blockedReasons sync.Map

var allStatuses = []v1alpha1.VersionStatus{
	v1alpha1.VersionNotRegistered, v1alpha1.VersionInactive, v1alpha1.VersionRamping,
	v1alpha1.VersionCurrent, v1alpha1.VersionDraining, v1alpha1.VersionDrained, v1alpha1.VersionUnknown,
}

// observeRollout updates the metrics from the old status and what the new
// one shows.
// prevStatus is each version's status before the pass; seen is the
// Temporal state the plan saw (nil when unknown).
func observeRollout(twd *v1alpha1.TemporalWorkerDeployment, before []metav1.Condition, prevStatus map[string]v1alpha1.VersionStatus,
	res planner.Report, seen *planner.TemporalState, now time.Time) {
	setGauges(twd, res)
	setDrainGauge(twd, res)
	setDrainTimes(twd, prevStatus, res, seen)
	setBlocked(twd, res)
	prev := meta.FindStatusCondition(before, v1alpha1.ConditionProgressing)
	if (prev == nil || prev.Status != metav1.ConditionTrue) && res.Progressing.Status == metav1.ConditionTrue {
		rolloutsStarted.Inc()
	}
	if prev == nil || prev.Status != metav1.ConditionTrue || res.State == planner.StateMoving {
		return // only the end of a moving rollout counts
	}
	if res.State == planner.StateComplete {
		rollouts.WithLabelValues("complete").Inc()
		rolloutDuration.Observe(now.Sub(prev.LastTransitionTime.Time).Seconds())
		return
	}
	rollouts.WithLabelValues("blocked:" + res.Progressing.Reason).Inc()
}

// setGauges sets versions by status and the ramp. While Temporal is
// unknown the last known values stay, as status keeps them.
func setGauges(twd *v1alpha1.TemporalWorkerDeployment, res planner.Report) {
	counts := map[v1alpha1.VersionStatus]float64{}
	var ramp float64
	for _, v := range res.Versions {
		if v.Status == "" {
			return
		}
		counts[v.Status]++
		if v.Target && v.RampPercentage != nil {
			ramp = float64(*v.RampPercentage)
		}
	}
	// A status no version has gets no series: an idle TWD has one
	// (Current) rather than seven, which was most of the controller's
	// metric memory at thousands of TWDs.
	for _, s := range allStatuses {
		if counts[s] == 0 {
			versionsByStatus.DeleteLabelValues(twd.Namespace, twd.Name, string(s))
			continue
		}
		versionsByStatus.WithLabelValues(twd.Namespace, twd.Name, string(s)).Set(counts[s])
	}
	rampPercentage.WithLabelValues(twd.Namespace, twd.Name).Set(ramp)
}

// setBlocked keeps one rollout_blocked series while the rollout is
// blocked, with its reason.
func setBlocked(twd *v1alpha1.TemporalWorkerDeployment, res planner.Report) {
	key := twd.Namespace + "/" + twd.Name
	reason := ""
	if res.State == planner.StateBlocked {
		reason = res.Progressing.Reason
	}
	if old, ok := blockedReasons.Load(key); ok && old.(string) != reason {
		rolloutBlocked.DeleteLabelValues(twd.Namespace, twd.Name, old.(string))
	}
	if reason == "" {
		blockedReasons.Delete(key)
		return
	}
	blockedReasons.Store(key, reason)
	rolloutBlocked.WithLabelValues(twd.Namespace, twd.Name, reason).Set(1)
}

// setDrainTimes keeps each draining version's start, and observes how
// long a version took once Temporal reports it drained. While Temporal is
// unknown the last known values stay.
func setDrainTimes(twd *v1alpha1.TemporalWorkerDeployment, prevStatus map[string]v1alpha1.VersionStatus, res planner.Report, seen *planner.TemporalState) {
	if seen == nil {
		return
	}
	now := map[string]v1alpha1.VersionStatus{}
	for _, v := range res.Versions {
		if v.Status == "" {
			return
		}
		now[v.BuildID] = v.Status
	}
	kept := map[string]bool{}
	for _, tv := range seen.Versions {
		if tv.DrainingSince == nil {
			continue
		}
		switch now[tv.BuildID] {
		case v1alpha1.VersionDraining:
			kept[tv.BuildID] = true
			drainingSince.WithLabelValues(twd.Namespace, twd.Name, tv.BuildID).Set(float64(tv.DrainingSince.UnixNano()) / 1e9)
		case v1alpha1.VersionDrained:
			if prevStatus[tv.BuildID] == v1alpha1.VersionDraining && tv.DrainedSince != nil {
				drainDuration.Observe(tv.DrainedSince.Sub(*tv.DrainingSince).Seconds())
			}
		}
	}
	for b := range prevStatus {
		if !kept[b] {
			drainingSince.DeleteLabelValues(twd.Namespace, twd.Name, b)
		}
	}
	for b := range now {
		if !kept[b] {
			drainingSince.DeleteLabelValues(twd.Namespace, twd.Name, b)
		}
	}
}

// versionStatuses is each version's status in st, by build ID.
func versionStatuses(st v1alpha1.TemporalWorkerDeploymentStatus) map[string]v1alpha1.VersionStatus {
	out := map[string]v1alpha1.VersionStatus{}
	for _, v := range append([]*v1alpha1.WorkerVersion{st.TargetVersion, st.CurrentVersion, st.RampingVersion}, ptrs(st.DeprecatedVersions)...) {
		if v != nil {
			out[v.BuildID] = v.Status
		}
	}
	return out
}

// forgetMetrics drops the series of a deleted TWD.
func forgetMetrics(namespace, name string) {
	drainingSince.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	if old, ok := blockedReasons.LoadAndDelete(namespace + "/" + name); ok {
		rolloutBlocked.DeleteLabelValues(namespace, name, old.(string))
	}
	rampPercentage.DeleteLabelValues(namespace, name)
	workersRevived.DeleteLabelValues(namespace, name)
	forgetDrainMetrics(namespace, name)
	for _, s := range allStatuses {
		versionsByStatus.DeleteLabelValues(namespace, name, string(s))
	}
}
