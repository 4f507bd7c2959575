package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
)

// The regression guard: every run is compared with the previous one found
// in the results directory, so that a slowdown shows in the run that
// caused it. Only figures both runs measured are compared; a fleet size
// is compared only with the same size.

// figure is one number of a run; all of them are better lower.
type figure struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// figureChange is one figure in the previous run and in this one.
type figureChange struct {
	Figure  string  `json:"figure"`
	Before  float64 `json:"before"`
	Now     float64 `json:"now"`
	Unit    string  `json:"unit"`
	Percent float64 `json:"percent"`
	// Flag is "worse" or "better" when the figure moved by more than
	// noiseShare, else empty.
	Flag string `json:"flag,omitempty"`
}

// noiseShare: on a shared 2-core machine figures move by a few percent
// from run to run; only a larger change is flagged.
const noiseShare = 0.15

// figures are the numbers a run is judged by.
func figures(res Result) map[string]figure {
	out := map[string]figure{}
	add := func(name, unit string, v float64, ok bool) {
		if ok {
			out[name] = figure{Value: v, Unit: unit}
		}
	}
	var reaction, e2e, shown, step []float64
	for _, r := range res.Rollouts {
		reaction = append(reaction, r.ReactionSeconds)
		e2e = append(e2e, r.EndToEndSeconds)
		if !r.Ready.IsZero() && !r.Current.IsZero() {
			shown = append(shown, r.Ready.Sub(r.Current).Seconds())
		}
	}
	for _, s := range res.Steps {
		step = append(step, s.ReactionSeconds)
	}
	rs, es, ss, sh := stats(reaction), stats(e2e), stats(step), stats(shown)
	add("AllAtOnce reaction, median", "s", rs.Median, rs.N > 0)
	add("AllAtOnce status showing the change after current, median", "s", sh.Median, sh.N > 0)
	add("AllAtOnce reaction, p95", "s", rs.P95, rs.N > 0)
	add("AllAtOnce end to end, median", "s", es.Median, es.N > 0)
	add("Progressive step reaction, median", "s", ss.Median, ss.N > 0)
	var late, minReady, slowDescribe []float64
	for _, r := range res.LatePollers {
		late = append(late, r.ReactionSeconds)
	}
	for _, r := range res.MinReady {
		minReady = append(minReady, r.ReactionSeconds)
	}
	for _, f := range res.Floor {
		slowDescribe = append(slowDescribe, f.SlowestDescribeSeconds)
	}
	ls, mr, ds := stats(late), stats(minReady), stats(slowDescribe)
	add("late pollers reaction, median", "s", ls.Median, ls.N > 0)
	add("AllAtOnce reaction with minReadySeconds 1, median", "s", mr.Median, mr.N > 0)
	add("Temporal: slowest describe of a new version in the 2.5 s after registration, median", "s", ds.Median, ds.N > 0)
	if w := res.RolloutLoad; w.Rollouts > 0 {
		var calls float64
		for _, n := range w.InRollouts {
			calls += n
		}
		add("Temporal calls per AllAtOnce rollout", "calls", calls/float64(w.Rollouts), true)
	}
	if len(res.Retirements) > 0 {
		var calls float64
		for _, r := range res.Retirements {
			for _, n := range r.ControllerRPCs {
				calls += n
			}
		}
		add("Temporal calls per AllAtOnce rollout, retirement included", "calls", calls/float64(len(res.Retirements)), true)
	}
	for _, w := range res.Waiting {
		add(fmt.Sprintf("Temporal reads per waiting TWD per minute, %d waiting", w.TWDs), "/min", w.Window.ReadsPerTWDMin, true)
	}
	for _, h := range res.HandBacks {
		p := fmt.Sprintf("manager role handed back, %d waiting: ", h.TWDs)
		seen, status := stats(h.SeenSeconds), stats(h.StatusSeconds)
		add(p+"seen, median", "s", seen.Median, seen.N > 0)
		add(p+"status shows it, median", "s", status.Median, status.N > 0)
		add(p+"Temporal reads per TWD per minute while waiting", "/min", h.Window.ReadsPerTWDMin, h.Window.Seconds > 0)
	}
	for _, s := range res.Scales {
		p := fmt.Sprintf("N=%d: ", s.N)
		rolled := s.Rollout.Seconds > 0
		add(p+"roll out all after a shared image change", "s", s.RolloutSeconds, rolled)
		add(p+"each TWD's rollout, median", "s", s.RolloutEndToEnd.Median, rolled)
		add(p+"available -> Ready seen, median", "s", s.RolloutStages[stageReady].Median, s.RolloutStages[stageReady].N > 0)
		add(p+"old versions retired after", "s", s.RetireSeconds, rolled)
		add(p+"controller CPU, rolling out", "CPU s/min", s.Rollout.CPUSecondsPerMin, rolled)
		// Per TWD rolled out, not per minute: a faster rollout makes the
		// same reads in less time.
		reads, _, _ := byKind(s.Rollout.ControllerRPCs)
		add(p+"Temporal reads per TWD rolled out", "reads", reads/float64(max(s.N, 1)), rolled)
		add(p+"controller RSS, idle", "MiB", s.Idle.RSSMiB, s.Idle.Seconds > 0)
		add(p+"controller live heap, idle", "MiB", s.Idle.HeapMiB, s.Idle.HeapMiB > 0)
		add(p+"controller CPU, idle", "CPU s/min", s.Idle.CPUSecondsPerMin, s.Idle.Seconds > 0)
		add(p+"Temporal reads per idle TWD per minute", "/min", s.Idle.ReadsPerTWDMin, s.Idle.Seconds > 0)
	}
	if a := res.Analysis; a != nil && a.Completed > 0 && !a.Baseline {
		p := fmt.Sprintf("analysis, %d TWDs: ", a.TWDs)
		add(p+"visibility counts per TWD per judged step", "counts", a.CountsPerStep, true)
		add(p+"peak visibility counts per second (10 s)", "/s", a.CountRatePeak10s, true)
		add(p+"roll out all", "s", a.RolloutSeconds, !a.TimedOut)
	}
	return out
}

// compare lists the figures both runs have, in name order.
func compare(before, now map[string]figure) []figureChange {
	var out []figureChange
	for name, n := range now {
		b, ok := before[name]
		if !ok {
			continue
		}
		c := figureChange{Figure: name, Before: b.Value, Now: n.Value, Unit: n.Unit}
		if b.Value != 0 {
			c.Percent = (n.Value - b.Value) / b.Value * 100
		}
		switch {
		case b.Value == 0 && n.Value == 0:
		case b.Value == 0 || c.Percent > noiseShare*100:
			c.Flag = "worse"
		case c.Percent < -noiseShare*100:
			c.Flag = "better"
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Figure < out[j].Figure })
	return out
}

// previousResult is the newest run in dir other than this one's, read
// from its result.json.
func previousResult(dir, thisRun string) (string, Result, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", Result{}, err
	}
	// Run directories are named by their start time, so names sort by age.
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() > entries[j].Name() })
	for _, d := range entries {
		p := filepath.Join(dir, d.Name(), "result.json")
		if !d.IsDir() || filepath.Join(dir, d.Name()) == thisRun {
			continue
		}
		if res, err := readResult(p); err == nil {
			return p, res, nil
		}
	}
	return "", Result{}, fmt.Errorf("no earlier result.json in %s", dir)
}

// readResult reads a result.json, also of runs from before the scale
// phase had steps (one "scale" object).
func readResult(path string) (Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{}, err
	}
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		return res, err
	}
	if len(res.Scales) == 0 {
		var old struct {
			Scale *Scale `json:"scale"`
		}
		if err := json.Unmarshal(data, &old); err == nil && old.Scale != nil {
			res.Scales = []Scale{*old.Scale}
		}
	}
	return res, nil
}

func printChanges(w io.Writer, path string, prev Result, changes []figureChange) {
	fmt.Fprintf(w, "Compared with the previous run (%s, %s, load average %v at start):\n", path,
		prev.Started.Format("2006-01-02 15:04"), prev.Machine["loadAverageAtStart"])
	if prev.Error != "" {
		fmt.Fprintf(w, "  (that run stopped early: %s)\n", prev.Error)
	}
	if len(changes) == 0 {
		fmt.Fprintln(w, "  no figure in common")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tBEFORE\tNOW\tCHANGE\t")
	for _, c := range changes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%+.0f%% %s\t\n", c.Figure, number(c.Before, c.Unit), number(c.Now, c.Unit), c.Percent, c.Flag)
	}
	tw.Flush()
	fmt.Fprintf(w, "(every figure is better lower; a change of more than %.0f%% is flagged; the machine is shared, so repeat a run before trusting one flag)\n", noiseShare*100)
}

func number(v float64, unit string) string {
	switch {
	case unit == "s":
		return secs(v)
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}
