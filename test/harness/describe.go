package harness

import (
	"fmt"
	"strings"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// DescribeTWD summarises a TemporalWorkerDeployment's status on one line,
// for failure messages: generations, conditions, versions, gate.
func DescribeTWD(twd *v1alpha1.TemporalWorkerDeployment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation=%d observed=%d", twd.Generation, twd.Status.ObservedGeneration)
	for _, c := range twd.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message)
	}
	v := func(label string, w *v1alpha1.WorkerVersion) {
		if w != nil {
			fmt.Fprintf(&b, " %s=%s:%s", label, w.BuildID, w.Status)
			if w.RampPercentage != nil {
				fmt.Fprintf(&b, "@%d%%", *w.RampPercentage)
			}
		}
	}
	v("target", twd.Status.TargetVersion)
	v("current", twd.Status.CurrentVersion)
	v("ramping", twd.Status.RampingVersion)
	for i := range twd.Status.DeprecatedVersions {
		v("deprecated", &twd.Status.DeprecatedVersions[i])
	}
	if g := twd.Status.Gate; g != nil {
		fmt.Fprintf(&b, " gate=%s:%s(%q)", g.BuildID, g.Result, g.Message)
	}
	return b.String()
}
