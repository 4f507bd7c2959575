package soak

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestCheckFlat(t *testing.T) {
	samples := func(pid int, from, n int, bytes func(i int) int64) []RSSSample {
		var s []RSSSample
		for i := 0; i < n; i++ {
			s = append(s, RSSSample{At: at(from + 10*i), PID: pid, Bytes: bytes(i)})
		}
		return s
	}
	steady := func(i int) int64 { return 60*mib + int64(i%3)*mib }
	growing := func(i int) int64 { return 60*mib + int64(i)*mib }
	// An earlier process's samples, even huge ones, do not count.
	old := samples(1, 0, 10, func(int) int64 { return 900 * mib })

	f := CheckFlat(append(old, samples(2, 100, 60, steady)...), time.Minute, 5*time.Minute)
	if !f.Evaluated || !f.Flat || f.PID != 2 || f.Samples != 54 {
		t.Errorf("steady memory: %+v", f)
	}
	f = CheckFlat(samples(2, 100, 60, growing), time.Minute, 5*time.Minute)
	if !f.Evaluated || f.Flat || f.SlopeMiBPerHour < 300 {
		t.Errorf("growing memory: %+v", f)
	}
	f = CheckFlat(samples(2, 100, 10, steady), time.Minute, 5*time.Minute)
	if f.Evaluated {
		t.Errorf("a 30s window was evaluated: %+v", f)
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 10; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Second)
	}
	if p := Summarize(d); p.N != 10 || p.P50 != 5 || p.P90 != 9 || p.Max != 10 {
		t.Errorf("Summarize = %+v", p)
	}
}
