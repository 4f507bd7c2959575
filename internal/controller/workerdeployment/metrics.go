package workerdeployment

import (
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
)

func init() {
	metrics.Registry.MustRegister(rollouts, rolloutDuration, rampPercentage, versionsByStatus, workersRevived)
}

var allStatuses = []v1alpha1.VersionStatus{
	v1alpha1.VersionNotRegistered, v1alpha1.VersionInactive, v1alpha1.VersionRamping,
	v1alpha1.VersionCurrent, v1alpha1.VersionDraining, v1alpha1.VersionDrained, v1alpha1.VersionUnknown,
}

// observeRollout updates the metrics from the old status and what the new
// one shows.
func observeRollout(twd *v1alpha1.TemporalWorkerDeployment, before []metav1.Condition, res planner.Report, now time.Time) {
	setGauges(twd, res)
	setDrainGauge(twd, res)
	prev := meta.FindStatusCondition(before, v1alpha1.ConditionProgressing)
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

// forgetMetrics drops the series of a deleted TWD.
func forgetMetrics(namespace, name string) {
	rampPercentage.DeleteLabelValues(namespace, name)
	workersRevived.DeleteLabelValues(namespace, name)
	forgetDrainMetrics(namespace, name)
	for _, s := range allStatuses {
		versionsByStatus.DeleteLabelValues(namespace, name, string(s))
	}
}
