package temporal

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
)

// MinServerVersion is the oldest Temporal server release the controller
// supports. 1.29 is the first with SetWorkerDeploymentManager, which the
// controller calls before its first routing change, on top of the Worker
// Deployment API and the version statuses and drainage (1.28) that
// scale-down relies on. Releases before 1.30 do not report when a version
// was last current, so a rollback there goes through the gate and the
// steps like any other version.
var MinServerVersion = ServerVersion{Major: 1, Minor: 29}

// ServerVersion is a Temporal server release.
type ServerVersion struct{ Major, Minor, Patch int }

func (v ServerVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less: v is an older release than o.
func (v ServerVersion) Less(o ServerVersion) bool {
	return cmp.Or(cmp.Compare(v.Major, o.Major), cmp.Compare(v.Minor, o.Minor), cmp.Compare(v.Patch, o.Patch)) < 0
}

// A pre-release or build suffix ("1.29.0-rc.1", "1.30.1+cloud") is ignored:
// it carries the features of its release.
var serverVersionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$`)

// ParseServerVersion reads the version GetSystemInfo reports.
func ParseServerVersion(s string) (ServerVersion, bool) {
	m := serverVersionRE.FindStringSubmatch(s)
	if m == nil {
		return ServerVersion{}, false
	}
	var n [3]int
	for i, part := range m[1:] {
		if part == "" {
			continue // no patch: x.y means x.y.0
		}
		v, err := strconv.Atoi(part)
		if err != nil {
			return ServerVersion{}, false // too many digits
		}
		n[i] = v
	}
	return ServerVersion{Major: n[0], Minor: n[1], Patch: n[2]}, true
}

// ServerTooOld: version, as GetSystemInfo reports it, is a release older
// than MinServerVersion. A version that cannot be read is not called too
// old: some hosted servers report their own numbering, and refusing them
// would stop every rollout on a guess.
func ServerTooOld(version string) bool {
	v, ok := ParseServerVersion(version)
	return ok && v.Less(MinServerVersion)
}
