package planner

import (
	"reflect"
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// drainingFor: v1 is the old version the summary shows draining for d.
func drainingFor(d time.Duration) func(*Input) {
	return func(in *Input) {
		rolledOut(in)
		v := version("v1", draining)
		v.DrainingSince = at(-d)
		setVersion(in, v)
	}
}

func ownDrainage(drained bool, changed, checked time.Duration) func(*Input) {
	return func(in *Input) {
		for i := range in.Temporal.Versions {
			if in.Temporal.Versions[i].BuildID == "v1" {
				v := &in.Temporal.Versions[i]
				v.OwnDrainage = &OwnDrainage{Drained: drained, ChangedAt: t0.Add(changed), CheckedAt: t0.Add(checked), DrainingSince: *v.DrainingSince}
			}
		}
	}
}

func TestDrainageToCrossCheck(t *testing.T) {
	cases := map[string]struct {
		in   Input
		want []string
	}{
		"draining for less than the cross-check delay: the summary is trusted": {
			in: with(base(), drainingFor(4*time.Minute)),
		},
		"draining for longer: the version itself is asked": {
			in: with(base(), drainingFor(6*time.Minute)), want: []string{"v1"},
		},
		"asked 4 minutes ago: not yet again": {
			in: with(base(), drainingFor(time.Hour), ownDrainage(false, -time.Hour, -4*time.Minute)),
		},
		"asked 5 minutes ago: again": {
			in: with(base(), drainingFor(time.Hour), ownDrainage(false, -time.Hour, -5*time.Minute)), want: []string{"v1"},
		},
		"no draining time from Temporal: not asked": {
			in: with(base(), rolledOut),
		},
		"routed (ramping) versions are never asked": {
			in: with(base(), drainingFor(time.Hour), func(in *Input) { in.Temporal.RampingBuildID = "v1" }),
		},
		"the summary says drained: nothing to cross-check": {
			in: with(base(), rolledOut, func(in *Input) {
				v := version("v1", drained)
				v.DrainingSince = at(-time.Hour)
				setVersion(in, v)
			}),
		},
		"Temporal unknown: nothing": {
			in: with(base(), func(in *Input) { in.Temporal = nil }),
		},
	}
	for name, c := range cases {
		if got := DrainageToCrossCheck(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: DrainageToCrossCheck = %v, want %v", name, got, c.want)
		}
	}
}

// The version's own drained report retires it although the summary still
// shows it draining; its own draining report, or a routed version, keeps
// its workers.
func TestOwnDrainageOverSummary(t *testing.T) {
	scaled := func(r Result) bool {
		for _, s := range r.Scale {
			if s.BuildID == "v1" && s.Replicas == 0 && s.Reason == ScaleSunset {
				return true
			}
		}
		return false
	}
	cases := map[string]struct {
		in        Input
		scaleDown bool
		status    v1alpha1.VersionStatus
	}{
		"summary draining, version drained past scaledownDelay: scaled down": {
			in:        with(base(), drainingFor(3*time.Hour), ownDrainage(true, -2*time.Hour, -time.Minute)),
			scaleDown: true, status: drained,
		},
		"summary draining, version drained within scaledownDelay: kept for now": {
			in:     with(base(), drainingFor(3*time.Hour), ownDrainage(true, -30*time.Minute, -time.Minute)),
			status: drained,
		},
		"summary draining, version draining too: kept": {
			in:     with(base(), drainingFor(3*time.Hour), ownDrainage(false, -3*time.Hour, -time.Minute)),
			status: draining,
		},
		"routed again since: kept whatever was remembered": {
			in: with(base(), drainingFor(3*time.Hour), ownDrainage(true, -2*time.Hour, -time.Minute), func(in *Input) {
				in.Temporal.RampingBuildID, in.Temporal.RampPercentage = "v1", 10
			}),
			status: ramping,
		},
	}
	for name, c := range cases {
		res := Plan(c.in)
		if got := scaled(res); got != c.scaleDown {
			t.Errorf("%s: v1 scaled down = %v, want %v (%+v)", name, got, c.scaleDown, res.Scale)
		}
		for _, v := range res.Versions {
			if v.BuildID == "v1" && v.Status != c.status {
				t.Errorf("%s: v1 shown %s, want %s", name, v.Status, c.status)
			}
		}
		for _, err := range violations(c.in, res) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A draining version with workers is looked at when its cross-check falls
// due, not up to a draining poll (a minute, long after a promotion) later.
func TestCrossCheckDueRequeue(t *testing.T) {
	cases := map[string]struct {
		in   Input
		want time.Duration
	}{
		"first cross-check due in 10 s": {
			in: with(base(), drainingFor(4*time.Minute+50*time.Second)), want: 10 * time.Second,
		},
		"next cross-check due in 30 s": {
			in:   with(base(), drainingFor(time.Hour), ownDrainage(false, -time.Hour, -4*time.Minute-30*time.Second)),
			want: 30 * time.Second,
		},
		"cross-check due now (described in this pass): the draining poll": {
			in: with(base(), drainingFor(time.Hour)), want: requeueIdle,
		},
		"due after the draining poll: the draining poll": {
			in: with(base(), drainingFor(time.Minute)), want: requeueIdle,
		},
		"no Deployment left: no hurry": {
			in: with(base(), drainingFor(4*time.Minute+50*time.Second), func(in *Input) { dropDep(in, "v1") }), want: requeueIdle,
		},
	}
	for name, c := range cases {
		if got := Plan(c.in).RequeueAfter; got != c.want {
			t.Errorf("%s: RequeueAfter = %s, want %s", name, got, c.want)
		}
	}
}
