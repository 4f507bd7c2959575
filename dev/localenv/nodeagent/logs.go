package nodeagent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// containerLog is one container's log file and where its last two runs
// start and end in it: every run appends to the same file.
type containerLog struct {
	path string

	mu   sync.Mutex
	runs []*logRun // the current (or last) run last; at most two
}

// logRun is a byte range of the log file; end is -1 while the run goes on
// (then the file's size is its end).
type logRun struct {
	l     *containerLog
	start int64
	end   int64
	done  <-chan struct{}
}

// started records a run that starts writing at offset. It ends the previous
// run there, so nothing a dying process group wrote late is lost from it.
func (l *containerLog) started(offset int64, done <-chan struct{}) *logRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.runs); n > 0 && l.runs[n-1].end < 0 {
		l.runs[n-1].end = offset
	}
	r := &logRun{l: l, start: offset, end: -1, done: done}
	l.runs = append(l.runs, r)
	if len(l.runs) > 2 {
		l.runs = l.runs[len(l.runs)-2:]
	}
	return r
}

// finish ends the run at the file's current size.
func (r *logRun) finish() {
	size := int64(-1)
	if fi, err := os.Stat(r.l.path); err == nil {
		size = fi.Size()
	}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if r.end < 0 {
		r.end = max(size, r.start)
	}
}

// bounds is the run's range now; end is the file size while it runs.
func (r *logRun) bounds() (start, end int64, running bool) {
	r.l.mu.Lock()
	start, end = r.start, r.end
	r.l.mu.Unlock()
	if end >= 0 {
		return start, end, false
	}
	fi, err := os.Stat(r.l.path)
	if err != nil {
		return start, start, true
	}
	return start, max(fi.Size(), start), true
}

// run returns the current run, or the previous one.
func (l *containerLog) run(previous bool) *logRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := len(l.runs) - 1
	if previous {
		i--
	}
	if i < 0 {
		return nil
	}
	return l.runs[i]
}

// logOptions are the query parameters of kubelet's containerLogs endpoint
// that the agent supports.
type logOptions struct {
	follow     bool
	tailLines  int64 // -1: all
	limitBytes int64 // -1: no limit
}

// followPoll is how often a followed log is checked for new output.
const followPoll = 200 * time.Millisecond

// serve writes the run's output to w per opts; with follow it keeps writing
// until the run ends or ctx is done.
func (r *logRun) serve(ctx context.Context, w io.Writer, opts logOptions) error {
	f, err := os.Open(r.l.path)
	if err != nil {
		return err
	}
	defer f.Close()
	start, end, running := r.bounds()
	if opts.tailLines >= 0 {
		if start, err = tailOffset(f, start, end, opts.tailLines); err != nil {
			return err
		}
	}
	out := w
	if opts.limitBytes >= 0 {
		out = &limitWriter{w: w, left: opts.limitBytes}
	}
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	pos := start
	copyTo := func(end int64) error {
		if end <= pos {
			return nil
		}
		n, err := io.Copy(out, io.NewSectionReader(f, pos, end-pos))
		pos += n
		flush()
		if errors.Is(err, errLimit) {
			return errLimit
		}
		return err
	}
	if err := copyTo(end); err != nil || !opts.follow || !running {
		return ignoreLimit(err)
	}
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.done:
			_, end, _ := r.bounds()
			return ignoreLimit(copyTo(end))
		case <-tick.C:
			_, end, _ := r.bounds()
			if err := copyTo(end); err != nil {
				return ignoreLimit(err)
			}
		}
	}
}

// tailOffset is where the last n lines of [start, end) begin; a last line
// without a newline counts as a line.
func tailOffset(f *os.File, start, end, n int64) (int64, error) {
	if n == 0 {
		return end, nil
	}
	const chunk = 32 << 10
	pos := end
	lines := int64(0)
	buf := make([]byte, chunk)
	first := true
	for pos > start {
		size := min(int64(chunk), pos-start)
		b := buf[:size]
		if _, err := f.ReadAt(b, pos-size); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if first && len(b) > 0 && b[len(b)-1] == '\n' {
			b = b[:len(b)-1] // the final newline ends the last line, it does not start one
		}
		first = false
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			if lines++; lines == n {
				return pos - size + int64(i) + 1, nil
			}
		}
		pos -= size
	}
	return start, nil
}

var errLimit = errors.New("limitBytes reached")

func ignoreLimit(err error) error {
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// limitWriter passes on at most left bytes, then fails with errLimit.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errLimit
	}
	short := int64(len(p)) > l.left
	if short {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err == nil && short {
		err = errLimit
	}
	return n, err
}
