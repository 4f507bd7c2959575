package kubectlplugin

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Style colours words on a terminal; the zero Style is plain text.
type Style struct{ Colour bool }

const (
	green  = "32"
	yellow = "33"
	red    = "31"
	blue   = "34"
	dim    = "2"
)

func (s Style) paint(code, text string) string {
	if !s.Colour || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// statusColour: green serves traffic, blue gets some, yellow waits or
// drains, red is blocked.
func statusColour(status string) string {
	switch status {
	case string(v1alpha1.VersionCurrent), "True":
		return green
	case string(v1alpha1.VersionRamping):
		return blue
	case string(v1alpha1.VersionDraining), string(v1alpha1.VersionInactive), "Unknown":
		return yellow
	case "False":
		return red
	}
	return dim
}

// RenderStatus writes the tree of one TemporalWorkerDeployment; ages are
// relative to now.
func RenderStatus(w io.Writer, v View, now time.Time, s Style) {
	head := fmt.Sprintf("%s/%s  %s", v.Namespace, v.Name, v.Strategy)
	if v.Paused {
		head += "  " + s.paint(yellow, "paused")
	}
	if v.Aborted != "" {
		head += "  " + s.paint(red, "aborted "+v.Aborted)
	}
	fmt.Fprintln(w, s.paint("1", head))
	ready := v.Ready
	if ready == "" {
		ready = "Unknown"
	}
	readyColour := statusColour(ready)
	if ready == "False" && Moving(v.Reason) {
		readyColour = yellow
	}
	fmt.Fprintf(w, "Ready=%s %s: %s\n", s.paint(readyColour, ready), v.Reason, v.Message)
	for i, ver := range v.Versions {
		last := i == len(v.Versions)-1
		branch, indent := "├── ", "│   "
		if last {
			branch, indent = "└── ", "    "
		}
		line := s.paint("1", ver.BuildID)
		if ver.Role != "" {
			line += "  " + ver.Role
		}
		line += "  " + s.paint(statusColour(ver.Status), ver.Status)
		if ver.Ramp != nil && ver.Status == string(v1alpha1.VersionRamping) {
			line += fmt.Sprintf(" %d%%", *ver.Ramp)
		}
		fmt.Fprintln(w, branch+line)
		var leaves []string
		if ver.Deployment != "" {
			pods := fmt.Sprintf("%d/%d ready", ver.Ready, ver.Desired)
			if ver.Ready < ver.Desired {
				pods = s.paint(yellow, pods)
			}
			leaves = append(leaves, fmt.Sprintf("Deployment %s  %s", ver.Deployment, pods))
		} else {
			leaves = append(leaves, s.paint(dim, "no Deployment"))
		}
		if v.Gate != nil && v.Gate.BuildID == ver.BuildID {
			g := fmt.Sprintf("gate %s  %s", v.Gate.WorkflowID, s.paint(gateColour(v.Gate.Result), v.Gate.Result))
			if v.Gate.Message != "" {
				g += ": " + v.Gate.Message
			}
			leaves = append(leaves, g)
		}
		if ver.PinnedWorkflows != nil {
			d := fmt.Sprintf("drainage: %d pinned workflows open", *ver.PinnedWorkflows)
			if ver.DrainDeadline != nil {
				d += ", deadline in " + age(ver.DrainDeadline.Sub(now))
			}
			leaves = append(leaves, d)
		}
		if ver.DrainedSince != nil {
			leaves = append(leaves, "drained "+age(now.Sub(*ver.DrainedSince))+" ago")
		}
		for j, l := range leaves {
			b := "├── "
			if j == len(leaves)-1 {
				b = "└── "
			}
			fmt.Fprintln(w, indent+b+l)
		}
	}
	if len(v.Owned) > 0 {
		fmt.Fprintln(w, "Owned copies")
		for i, o := range v.Owned {
			b := "├── "
			if i == len(v.Owned)-1 {
				b = "└── "
			}
			line := fmt.Sprintf("%s (%s)  Ready=%s", o.Name, o.Kind, s.paint(statusColour(o.Ready), o.Ready))
			if len(o.Applied) > 0 {
				line += "  applied to " + strings.Join(o.Applied, ", ")
			}
			if len(o.Failed) > 0 {
				line += "  " + s.paint(red, "not applied to "+strings.Join(o.Failed, ", "))
			}
			fmt.Fprintln(w, b+line)
		}
	}
	if len(v.Events) > 0 {
		fmt.Fprintln(w, "Events")
		for _, e := range v.Events {
			typ := e.Type
			if typ == "Warning" {
				typ = s.paint(red, typ)
			}
			fmt.Fprintf(w, "  %-8s %s  %s  %s\n", age(now.Sub(e.Time))+" ago", typ, e.Reason, e.Message)
		}
	}
}

func gateColour(result string) string {
	switch result {
	case "Succeeded":
		return green
	case "Failed":
		return red
	}
	return yellow
}

// Moving: a reason of a rollout in progress (docs/conditions.md), shown in
// yellow rather than red.
func Moving(reason string) bool {
	switch reason {
	case v1alpha1.ReasonWaitingForPollers, v1alpha1.ReasonWaitingForPromotion, v1alpha1.ReasonRamping,
		v1alpha1.ReasonPaused, v1alpha1.ReasonWaitingForTemporal, v1alpha1.ReasonDeleting:
		return true
	}
	return false
}

func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

// ListRow is one line of list, and its -o json|yaml.
type ListRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Strategy  string `json:"strategy"`
	Current   string `json:"current,omitempty"`
	Target    string `json:"target,omitempty"`
	Ramp      *int32 `json:"rampPercentage,omitempty"`
	Ready     string `json:"ready"`
	Reason    string `json:"reason"`
}

func NewListRow(twd *v1alpha1.TemporalWorkerDeployment) ListRow {
	v := NewView(Snapshot{TWD: twd})
	r := ListRow{Namespace: v.Namespace, Name: v.Name, Strategy: v.Strategy, Ready: v.Ready, Reason: v.Reason}
	if r.Ready == "" {
		r.Ready = "Unknown"
	}
	if v.Paused {
		r.Strategy += " (paused)"
	}
	if c := twd.Status.CurrentVersion; c != nil {
		r.Current = c.BuildID
	}
	if t := twd.Status.TargetVersion; t != nil {
		r.Target = t.BuildID
		if t.Status == v1alpha1.VersionRamping {
			r.Ramp = t.RampPercentage
		}
	}
	return r
}

// RenderList writes one line per TemporalWorkerDeployment.
func RenderList(w io.Writer, rows []ListRow, allNamespaces bool, s Style) {
	table := [][]string{{"NAME", "STRATEGY", "CURRENT", "TARGET", "RAMP", "READY", "REASON"}}
	if allNamespaces {
		table[0] = append([]string{"NAMESPACE"}, table[0]...)
	}
	for _, r := range rows {
		ramp := "-"
		if r.Ramp != nil {
			ramp = fmt.Sprintf("%d%%", *r.Ramp)
		}
		line := []string{r.Name, r.Strategy, dash(r.Current), dash(r.Target), ramp, r.Ready, r.Reason}
		if allNamespaces {
			line = append([]string{r.Namespace}, line...)
		}
		table = append(table, line)
	}
	widths := make([]int, len(table[0]))
	for _, l := range table {
		for i, c := range l {
			widths[i] = max(widths[i], len(c))
		}
	}
	readyCol := len(table[0]) - 2
	for n, l := range table {
		var b strings.Builder
		for i, c := range l {
			cell := c
			if i < len(l)-1 {
				cell += strings.Repeat(" ", widths[i]-len(c)+3)
			}
			if n > 0 && i == readyCol {
				cell = s.paint(statusColour(c), cell)
			}
			b.WriteString(cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
