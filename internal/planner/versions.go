package planner

import "github.com/rainbow-deploy/rainbow/api/v1alpha1"

// versions lists every known build ID for status, sorted by build ID.
func versions(v *view) []Version {
	out := make([]Version, 0, len(v.builds))
	t := v.temporal()
	for _, b := range v.builds {
		ver := Version{BuildID: b, Status: v.status(b), Target: b == v.target}
		if d, ok := v.deps[b]; ok {
			ver.Deployment = d.Name
		}
		if tv, ok := v.tvs[b]; ok {
			ver.CurrentSince, ver.RampingSince, ver.DrainedSince = tv.CurrentSince, tv.RampingSince, tv.DrainedSince
		}
		if ver.Status == v1alpha1.VersionRamping && b == t.RampingBuildID {
			pct := t.RampPercentage
			ver.RampPercentage = &pct
		}
		out = append(out, ver)
	}
	return out
}
