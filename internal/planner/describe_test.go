package planner

import (
	"reflect"
	"testing"
)

func TestVersionsToDescribe(t *testing.T) {
	cases := map[string]struct {
		in   Input
		want []string
	}{
		"the registered target before it is current": {in: base(), want: []string{"v2"}},
		"nothing while the target is current and the old version has workers": {
			in: with(base(), rolledOut),
		},
		"a drained version without a Deployment, for its deletion": {
			in:   with(base(), rolledOut, func(in *Input) { setVersion(in, version("v1", drained)); dropDep(in, "v1") }),
			want: []string{"v1"},
		},
		"a draining version without a Deployment is not deleted, so not described": {
			in: with(base(), rolledOut, func(in *Input) { dropDep(in, "v1") }),
		},
		"deleting: every version without a Deployment that nothing routes to": {
			in: with(deleting(), func(in *Input) {
				in.Deployments = nil
				in.Temporal.RampingBuildID = "v2"
			}),
			want: []string{"v1"},
		},
		"another identity manages the worker deployment: the target is not described": {
			in: with(base(), func(in *Input) { in.Temporal.ManagerIdentity = "alice" }),
		},
		"Temporal unknown: nothing": {
			in: with(base(), func(in *Input) { in.Temporal = nil }),
		},
	}
	for name, c := range cases {
		if got := VersionsToDescribe(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: VersionsToDescribe = %v, want %v", name, got, c.want)
		}
	}
}
