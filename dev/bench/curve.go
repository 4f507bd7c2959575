package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// phaseClock records how long each phase of a run took.
type phaseClock struct {
	res  *Result
	last time.Time
}

func newPhaseClock(res *Result) *phaseClock { return &phaseClock{res: res, last: res.Started} }

func (c *phaseClock) done(name string) {
	now := time.Now()
	c.res.Phases = append(c.res.Phases, phaseTime{Name: name, Seconds: now.Sub(c.last).Seconds()})
	c.last = now
}

func printPhases(w io.Writer, phases []phaseTime) {
	fmt.Fprintln(w, "\nHow long each phase took:")
	for _, p := range phases {
		fmt.Fprintf(w, "- %s: %s\n", p.Name, time.Duration(p.Seconds*float64(time.Second)).Round(time.Second))
	}
}

// readsPerMin is the controller's Temporal reads a minute, all TWDs together.
func readsPerMin(w Window) float64 { return w.ReadsPerTWDMin * float64(w.TWDs) }

// printCurve is one line per fleet size: how the cost grows with work.
func printCurve(w io.Writer, scales []Scale) {
	fmt.Fprintln(w, "How cost grows with the fleet (each step adds TWDs, then changes every image at once, retires the old versions, and idles):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\troll out all\teach, median / p95\tspec->Deployment\tDeployment->available\tavailable->Ready\tretired after\t"+
		"ctrl CPU busy / idle\tctrl RSS / heap idle\treads/min busy / idle\tdevenv CPU busy\tworkers' PSS busy\t")
	for _, s := range scales {
		st := s.RolloutStages
		fmt.Fprintf(tw, "%d\t%s\t%s / %s\t%s\t%s\t%s\t%s\t%.2f / %.2f s/min\t%.0f / %.1f MiB\t%.0f / %.1f\t%.1f s/min\t%.0f MiB\t\n",
			s.N, secs(s.RolloutSeconds), secs(s.RolloutEndToEnd.Median), secs(s.RolloutEndToEnd.P95),
			secs(st[stageCreated].Median), secs(st[stageAvailable].Median), secs(st[stageReady].Median), secs(s.RetireSeconds),
			s.Rollout.CPUSecondsPerMin, s.Idle.CPUSecondsPerMin, s.Idle.RSSMiB, s.Idle.HeapMiB,
			readsPerMin(s.Rollout), readsPerMin(s.Idle), s.Rollout.CPUByProcess["devenv"], s.Rollout.PSSByProcess["demo-worker"])
	}
	tw.Flush()
	// Below some 50 TWDs apart, the RSS's own swing (a MiB or so) is larger
	// than what the TWDs add, and a slope would mislead.
	if n := len(scales); n > 1 && scales[n-1].N-scales[0].N >= 50 {
		a, b := scales[0], scales[n-1]
		per := (b.Idle.RSSMiB - a.Idle.RSSMiB) / float64(b.N-a.N)
		heap := (b.Idle.HeapMiB - a.Idle.HeapMiB) / float64(b.N-a.N)
		fmt.Fprintf(w, "controller RSS grows by %.3f MiB per TWD, its heap by %.3f MiB (idle, N=%d to N=%d): %.0f MiB RSS at 5,000 if it stays linear\n",
			per, heap, a.N, b.N, b.Idle.RSSMiB+per*float64(5000-b.N))
	}
	if n := len(scales); n > 0 {
		s := scales[n-1]
		if k := s.Rollout.Processes["demo-worker"]; k > 0 {
			fmt.Fprintf(w, "a demo-worker process costs %.1f MiB (PSS: its share of the program text, its own heap; %d running at the end of the N=%d rollout)\n",
				s.Rollout.PSSByProcess["demo-worker"]/float64(k), k, s.N)
		}
	}
}
