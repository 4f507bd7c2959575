package inflight

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)

func TestDefaultsAreValid(t *testing.T) {
	if !Defaults.Valid() {
		t.Fatalf("Defaults %+v are not valid", Defaults)
	}
	for _, c := range []Config{
		{Initial: 4, Min: 0, Max: 8, SlowAfter: time.Second, Cut: 0.5},
		{Initial: 9, Min: 1, Max: 8, SlowAfter: time.Second, Cut: 0.5},
		{Initial: 4, Min: 1, Max: 8, SlowAfter: 0, Cut: 0.5},
		{Initial: 4, Min: 1, Max: 8, SlowAfter: time.Second, Cut: 1},
	} {
		if c.Valid() {
			t.Errorf("%+v is valid", c)
		}
	}
}

func TestWindowAfter(t *testing.T) {
	c := Config{Initial: 8, Min: 2, Max: 10, SlowAfter: time.Second, Cut: 0.5}
	fast := 50 * time.Millisecond
	cases := []struct {
		name      string
		w         Window
		o         Outcome
		limit     float64
		cutAt     time.Time
		unchanged bool
	}{
		{name: "a fast answer with places to spare changes nothing",
			w: Window{Limit: 8}, o: Outcome{Sent: t0, Latency: fast}, unchanged: true},
		{name: "a fast answer in a full window grows it by one over the limit",
			w: Window{Limit: 8}, o: Outcome{Sent: t0, Latency: fast, Full: true}, limit: 8.125},
		{name: "growth stops at Max",
			w: Window{Limit: 9.95}, o: Outcome{Sent: t0, Latency: fast, Full: true}, limit: 10},
		{name: "a slow answer cuts the limit and records when it came back",
			w: Window{Limit: 8}, o: Outcome{Sent: t0, Latency: 3 * time.Second}, limit: 4, cutAt: t0.Add(3 * time.Second)},
		{name: "a refusal for load cuts, however fast it came",
			w: Window{Limit: 8}, o: Outcome{Sent: t0, Latency: fast, Overloaded: true}, limit: 4, cutAt: t0.Add(fast)},
		{name: "a slow answer in a full window still cuts",
			w: Window{Limit: 8}, o: Outcome{Sent: t0, Latency: 2 * time.Second, Full: true}, limit: 4, cutAt: t0.Add(2 * time.Second)},
		{name: "cuts stop at Min",
			w: Window{Limit: 3}, o: Outcome{Sent: t0, Latency: 2 * time.Second}, limit: 2, cutAt: t0.Add(2 * time.Second)},
		{name: "a call sent before the last cut does not cut again",
			w: Window{Limit: 4, CutAt: t0.Add(time.Second)}, o: Outcome{Sent: t0, Latency: 5 * time.Second}, unchanged: true},
		{name: "a call sent as the last cut came back does not cut again",
			w: Window{Limit: 4, CutAt: t0}, o: Outcome{Sent: t0, Latency: 5 * time.Second, Overloaded: true}, unchanged: true},
		{name: "a call sent after the last cut cuts again",
			w: Window{Limit: 4, CutAt: t0}, o: Outcome{Sent: t0.Add(time.Millisecond), Latency: 5 * time.Second}, limit: 2, cutAt: t0.Add(5001 * time.Millisecond)},
		{name: "exactly SlowAfter is still fast",
			w: Window{Limit: 8}, o: Outcome{Sent: t0, Latency: time.Second, Full: true}, limit: 8.125},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.w.After(c, tc.o)
			if tc.unchanged {
				if got != tc.w {
					t.Fatalf("window %+v became %+v", tc.w, got)
				}
				return
			}
			if math.Abs(got.Limit-tc.limit) > 1e-9 {
				t.Errorf("limit %v, want %v", got.Limit, tc.limit)
			}
			want := tc.w.CutAt
			if !tc.cutAt.IsZero() {
				want = tc.cutAt
			}
			if !got.CutAt.Equal(want) {
				t.Errorf("cut at %v, want %v", got.CutAt, want)
			}
		})
	}
}

// TestOneSlowSpellCutsOnce: every call in flight when Temporal slowed
// down comes back slow; only the first cuts, and the window then grows
// back by one a round of fast answers.
func TestOneSlowSpellCutsOnce(t *testing.T) {
	c := Defaults
	w := Start(c)
	for i := range 16 {
		w = w.After(c, Outcome{Sent: t0.Add(time.Duration(i) * time.Millisecond), Latency: 30 * time.Second})
	}
	if w.Limit != 8 {
		t.Fatalf("16 slow calls sent together left the limit at %v, want one cut to 8", w.Limit)
	}
	sent := w.CutAt
	for range 8 {
		sent = sent.Add(10 * time.Millisecond)
		w = w.After(c, Outcome{Sent: sent, Latency: 20 * time.Millisecond, Full: true})
	}
	if w.Limit < 8.9 || w.Limit > 9 {
		t.Fatalf("a round of 8 fast answers in a full window made the limit %v, want about 9", w.Limit)
	}
}

func TestSlots(t *testing.T) {
	for _, tc := range []struct {
		limit float64
		slots int
	}{{0.2, 1}, {1, 1}, {2.99, 2}, {16, 16}} {
		if got := (Window{Limit: tc.limit}).Slots(); got != tc.slots {
			t.Errorf("Slots of %v = %d, want %d", tc.limit, got, tc.slots)
		}
	}
}

// FuzzWindow: whatever comes back, the limit stays within its bounds, a
// slow call never grows it, a fast one never shrinks it, and the time of
// the last cut never goes back.
func FuzzWindow(f *testing.F) {
	f.Add(uint8(16), int64(0), int64(3000), false, false, int64(0))
	f.Add(uint8(2), int64(5), int64(10), true, true, int64(1))
	f.Add(uint8(64), int64(-5), int64(20), false, true, int64(3))
	f.Fuzz(func(t *testing.T, limit uint8, sentMs, latencyMs int64, overloaded, full bool, cutMs int64) {
		c := Defaults
		w := Window{Limit: math.Max(c.Min, math.Min(c.Max, float64(limit)))}
		if cutMs != 0 {
			w.CutAt = t0.Add(time.Duration(cutMs) * time.Millisecond)
		}
		o := Outcome{Sent: t0.Add(time.Duration(sentMs) * time.Millisecond), Latency: time.Duration(max(0, latencyMs)) * time.Millisecond,
			Overloaded: overloaded, Full: full}
		got := w.After(c, o)
		if got.Limit < c.Min || got.Limit > c.Max || got.Slots() < 1 {
			t.Fatalf("limit %v out of [%v, %v]", got.Limit, c.Min, c.Max)
		}
		if o.Slow(c) && got.Limit > w.Limit {
			t.Fatalf("a slow call grew the limit %v to %v", w.Limit, got.Limit)
		}
		if !o.Slow(c) && got.Limit < w.Limit {
			t.Fatalf("a fast call shrank the limit %v to %v", w.Limit, got.Limit)
		}
		if got.CutAt.Before(w.CutAt) {
			t.Fatalf("the last cut went back from %v to %v", w.CutAt, got.CutAt)
		}
		if got.Limit < w.Limit && !w.CutAt.IsZero() && !o.Sent.After(w.CutAt) {
			t.Fatalf("a call sent before the last cut cut again")
		}
	})
}
