package temporaldev

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPropagationHoldFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), PropagationHoldFile)
	h := propagationHold{file: file}
	for _, c := range []struct {
		content, queue string
		want           time.Duration
	}{
		{"", "orders", 0},
		{"2s", "orders", 2 * time.Second},
		{"2s\n", "/_sys/orders/3", 2 * time.Second},
		{"2s orders", "/_sys/orders/3", 2 * time.Second},
		{"2s orders", "payments", 0},
		{"-1s", "orders", 0},
		{"soon", "orders", 0},
	} {
		if err := os.WriteFile(file, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := h.duration(c.queue); got != c.want {
			t.Errorf("hold %q, task queue %q: %v, want %v", c.content, c.queue, got, c.want)
		}
	}
	os.Remove(file)
	if got := h.duration("orders"); got != 0 {
		t.Errorf("without the file: %v, want no hold", got)
	}
}
