package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// Stats summarises samples in seconds.
type Stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P95    float64 `json:"p95"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

// stats uses nearest-rank percentiles: p95 of 12 samples is the 12th.
func stats(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	var sum float64
	for _, x := range s {
		sum += x
	}
	st := Stats{N: len(s), Min: s[0], Max: s[len(s)-1], Mean: sum / float64(len(s)), P95: rank(0.95)}
	if len(s)%2 == 1 {
		st.Median = s[len(s)/2]
	} else {
		st.Median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return st
}

// row is one figure of the table: what, how much, against what, and how
// it was measured.
type row struct {
	Figure string `json:"figure"`
	Value  string `json:"value"`
	Target string `json:"target,omitempty"`
	// Verdict is PASS, MISS, or empty when there is no target or the
	// figure was not measured at the target's size.
	Verdict string `json:"verdict,omitempty"`
	How     string `json:"how"`
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func printTable(w io.Writer, header string, rows []row) {
	fmt.Fprintln(w, header)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tVALUE\tTARGET\t")
	for _, r := range rows {
		target := r.Target
		if r.Verdict != "" {
			target += " " + r.Verdict
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", r.Figure, r.Value, target)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nHow each figure was measured:")
	for _, r := range rows {
		fmt.Fprintf(w, "- %s: %s\n", r.Figure, wrap(r.How, 110, "  "))
	}
}

func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && line+1+len(word) > width {
			b.WriteString("\n" + indent)
			line = len(indent)
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}

func secs(x float64) string {
	if x < 10 {
		return fmt.Sprintf("%.3f s", x)
	}
	return fmt.Sprintf("%.1f s", x)
}

func ms(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms", x*1000)
}
