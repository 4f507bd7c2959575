package demoworker

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// TestMetricsCarryTheBuildID: the SDK's counters come out in Prometheus'
// naming, labelled with the build ID as it is (dashes and dots kept), so
// that a query can select the version.
func TestMetricsCarryTheBuildID(t *testing.T) {
	h, serve := MetricsHandler("v2-0c3e.5b9a")
	h.WithTags(map[string]string{"activity_type": "WhoAmI"}).Counter("temporal_activity_execution_failed").Inc(3)
	want := `temporal_activity_execution_failed_total{activity_type="WhoAmI",worker_build_id="v2-0c3e.5b9a"} 3`
	var body string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		rec := httptest.NewRecorder()
		serve.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		if body = string(b); strings.Contains(body, want) {
			return
		}
	}
	t.Fatalf("no %s in:\n%s", want, body)
}

// TestActivityFailShare: a share of Hello's activity attempts fail, and
// the workflow still succeeds after retries.
func TestActivityFailShare(t *testing.T) {
	attempts := 0
	for i := range 20 {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterActivity(&Activities{BuildID: "v1", FailShare: 0.5})
		env.RegisterWorkflowWithOptions(Hello, workflow.RegisterOptions{Name: HelloWorkflow})
		env.SetStartWorkflowOptions(startOptions(i))
		env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { attempts++ })
		env.ExecuteWorkflow(HelloWorkflow, "x")
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("Hello failed: %v", err)
		}
	}
	// An attempt is retried only after it failed.
	if attempts < 30 || attempts > 80 {
		t.Fatalf("%d activity attempts for 20 workflows, want about 40 (half of the attempts fail)", attempts)
	}
}

func startOptions(i int) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: fmt.Sprintf("hello-%d", i)}
}
