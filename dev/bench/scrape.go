package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// series is one line of a Prometheus text exposition.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is a whole exposition.
type scrape []series

// fetchMetrics reads a whole exposition before parsing it, so that a
// read cut short is an error and not a truncated line, and tries three
// times: the dev server's exposition grows with every task queue and is
// slow to serve on a busy machine.
func fetchMetrics(url string) (scrape, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var sc scrape
		if sc, err = fetchOnce(url); err == nil {
			return sc, nil
		}
		time.Sleep(time.Second)
	}
	return nil, err
}

func fetchOnce(url string) (scrape, error) {
	client := http.Client{Timeout: 60 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return parseExposition(bytes.NewReader(body))
}

// parseExposition reads the text format: `name{k="v",...} value [ts]`.
func parseExposition(r io.Reader) (scrape, error) {
	var out scrape
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSeries(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSeries(line string) (series, error) {
	s := series{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					if rest[j] == 'n' {
						val.WriteByte('\n')
						continue
					}
				}
				val.WriteByte(rest[j])
			}
			if j == len(rest) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels[key] = val.String()
			rest = rest[j+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

func (sc scrape) matches(s series, name string, want map[string]string) bool {
	if s.name != name {
		return false
	}
	for k, v := range want {
		if s.labels[k] != v {
			return false
		}
	}
	return true
}

// sum adds every series of name whose labels include want.
func (sc scrape) sum(name string, want map[string]string) float64 {
	var t float64
	for _, s := range sc {
		if sc.matches(s, name, want) {
			t += s.value
		}
	}
	return t
}

// by sums series of name with labels want, grouped by the value of label.
func (sc scrape) by(name, label string, want map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range sc {
		if sc.matches(s, name, want) {
			out[s.labels[label]] += s.value
		}
	}
	return out
}

// histogram is a Prometheus histogram's change between two scrapes.
type histogram struct {
	buckets []bucket // cumulative, sorted by le
	count   float64
	sum     float64
}

type bucket struct {
	le    float64
	count float64
}

// histogramDelta is the histogram name{want} observed between a and b.
func histogramDelta(a, b scrape, name string, want map[string]string) histogram {
	ba, bb := a.by(name+"_bucket", "le", want), b.by(name+"_bucket", "le", want)
	var h histogram
	for le, n := range bb {
		f, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		h.buckets = append(h.buckets, bucket{le: f, count: n - ba[le]})
	}
	sort.Slice(h.buckets, func(i, j int) bool { return h.buckets[i].le < h.buckets[j].le })
	h.count = b.sum(name+"_count", want) - a.sum(name+"_count", want)
	h.sum = b.sum(name+"_sum", want) - a.sum(name+"_sum", want)
	return h
}

// quantile interpolates linearly within the bucket holding q, like
// PromQL's histogram_quantile. NaN when nothing was observed.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 || len(h.buckets) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	prevLE, prevCount := 0.0, 0.0
	for _, b := range h.buckets {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return prevLE // above the highest finite bucket: its bound
			}
			if b.count == prevCount {
				return b.le
			}
			return prevLE + (b.le-prevLE)*(rank-prevCount)/(b.count-prevCount)
		}
		prevLE, prevCount = b.le, b.count
	}
	return prevLE
}

func (h histogram) mean() float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	return h.sum / h.count
}

// procStat is a process's memory and CPU time from /proc.
type procStat struct {
	RSSMiB, PeakRSSMiB float64
	CPUSeconds         float64
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports
// except alpha and ia64.
const clockTicks = 100

func readProc(pid int) (procStat, error) {
	var p procStat
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kib, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			p.RSSMiB = kib / 1024
		case "VmHWM:":
			p.PeakRSSMiB = kib / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, err
	}
	// Fields after the command name, which may hold spaces: state is
	// field 3, utime 14 and stime 15.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 13 {
		return p, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	p.CPUSeconds = (utime + stime) / clockTicks
	return p, nil
}

// procCPU is one process's CPU time so far, and its memory.
type procCPU struct {
	name    string
	started uint64 // start time in ticks since boot, tells a reused pid apart
	seconds float64
	// pssMiB is the proportional set size: shared pages (the program's
	// text, which every demo-worker shares) count once over all sharers,
	// so the sum over processes is what they cost together.
	pssMiB float64
}

// pss reads a process's proportional set size from smaps_rollup.
func pss(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kib, _ := strconv.ParseFloat(f[1], 64)
			return kib / 1024
		}
	}
	return 0
}

// processCPU reads the CPU time and PSS of root and every process below
// it, by pid.
func processCPU(roots ...int) map[int]procCPU {
	type entry struct {
		ppid int
		cpu  procCPU
	}
	all := map[int]entry{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		open, closing := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(string(data[closing+1:]))
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		started, _ := strconv.ParseUint(f[19], 10, 64)
		all[pid] = entry{ppid, procCPU{name: string(data[open+1 : closing]), started: started, seconds: (utime + stime) / clockTicks}}
	}
	children := map[int][]int{}
	for pid, e := range all {
		children[e.ppid] = append(children[e.ppid], pid)
	}
	out := map[int]procCPU{}
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if e, ok := all[pid]; ok {
			e.cpu.pssMiB = pss(pid)
			out[pid] = e.cpu
		}
		queue = append(queue, children[pid]...)
	}
	return out
}

// cpuByName is the CPU time each kind of process used between a and b. A
// process that started in between counts in full; one that exited in
// between is missing (its time is lost with it).
func cpuByName(a, b map[int]procCPU) map[string]float64 {
	out := map[string]float64{}
	for pid, p := range b {
		d := p.seconds
		if q, ok := a[pid]; ok && q.started == p.started {
			d -= q.seconds
		}
		out[p.name] += d
	}
	return out
}

// pssByName adds up the memory of each kind of process.
func pssByName(procs map[int]procCPU) map[string]float64 {
	out := map[string]float64{}
	for _, p := range procs {
		out[p.name] += p.pssMiB
	}
	return out
}

// machineCPU is the busy and total time of all CPUs so far, in seconds.
func machineCPU() (busy, total float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy / clockTicks, total / clockTicks
}
