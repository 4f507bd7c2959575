package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// The admission table: invalid specs of the three kinds, each sent to the
// real API server (OpenAPI schema, CEL rules of the CRDs and the
// TemporalWorkerOwnedResource webhook), each refused with a cause naming
// the field and saying why. docs/admission-webhook.md lists the rules.

// Valid objects the rows change, as JSON.
const (
	tableTWD = `{"apiVersion":"temporal.io/v1alpha1","kind":"TemporalWorkerDeployment","metadata":{"name":"w"},"spec":{
		"template":{"spec":{"containers":[{"name":"worker","image":"demo-worker:v1"}]}},
		"workerOptions":{"connectionRef":{"name":"local"},"temporalNamespace":"default"}}}`
	tableConnection = `{"apiVersion":"temporal.io/v1alpha1","kind":"TemporalConnection","metadata":{"name":"c"},"spec":{"hostPort":"temporal:7233"}}`
	tableTWOR       = `{"apiVersion":"temporal.io/v1alpha1","kind":"TemporalWorkerOwnedResource","metadata":{"name":"r"},"spec":{
		"workerRef":{"name":"w"},"object":` + admissionHPA + `}}`
)

// admissionRow is one invalid spec: patch (a JSON merge patch) applied to
// base makes it. A create row sends the patched object; an update row
// creates base and then sends the patch. The refusal must carry a cause
// on field whose message holds message.
type admissionRow struct {
	name, base, patch string
	update            bool
	field, message    string
}

// Steps 1..n ramping, as JSON.
func rampSteps(n int) string {
	steps := make([]string, n)
	for i := range steps {
		steps[i] = fmt.Sprintf(`{"rampPercentage":%d,"pauseDuration":"1m"}`, i+1)
	}
	return "[" + strings.Join(steps, ",") + "]"
}

func admissionTable() []admissionRow {
	twd := func(name, patch, field, message string) admissionRow {
		return admissionRow{name: "twd/" + name, base: tableTWD, patch: patch, field: field, message: message}
	}
	// A Progressive rollout with the given analysis checks.
	analysis := func(checks string) string {
		return `{"spec":{"rollout":{"strategy":"Progressive","steps":[{"rampPercentage":10,"pauseDuration":"1m"}],"analysis":{"checks":` + checks + `}}}}`
	}
	conn := func(name, patch, field, message string) admissionRow {
		return admissionRow{name: "connection/" + name, base: tableConnection, patch: patch, field: field, message: message}
	}
	twor := func(name, object, field, message string) admissionRow {
		return admissionRow{name: "twor/" + name, base: tableTWOR, patch: `{"spec":{"object":` + object + `}}`, field: field, message: message}
	}
	update := func(r admissionRow) admissionRow { r.name, r.update = r.name+" (update)", true; return r }
	gate := func(g string) string { return `{"spec":{"rollout":{"gate":` + g + `}}}` }
	stepGate := func(g string) string {
		return `{"spec":{"rollout":{"strategy":"Progressive","steps":[{"rampPercentage":10,"pauseDuration":"1m","gate":` + g + `}]}}}`
	}
	return []admissionRow{
		// TemporalWorkerDeployment: the schema and its CEL rules.
		twd("no containers", `{"spec":{"template":{"spec":{"containers":null}}}}`, "spec.template.spec.containers", "Required value"),
		twd("negative replicas", `{"spec":{"replicas":-1}}`, "spec.replicas", "greater than or equal to 0"),
		twd("negative minReadySeconds", `{"spec":{"minReadySeconds":-5}}`, "spec.minReadySeconds", "greater than or equal to 0"),
		twd("progressDeadlineSeconds 0", `{"spec":{"progressDeadlineSeconds":0}}`, "spec.progressDeadlineSeconds", "greater than or equal to 1"),
		twd("no temporal namespace", `{"spec":{"workerOptions":{"temporalNamespace":null}}}`, "spec.workerOptions.temporalNamespace", "Required value"),
		twd("no connection name", `{"spec":{"workerOptions":{"connectionRef":{"name":""}}}}`, "spec.workerOptions.connectionRef.name", "at least 1 chars long"),
		twd("dot in deploymentName", `{"spec":{"workerOptions":{"deploymentName":"team.worker"}}}`, "spec.workerOptions.deploymentName", "should match"),
		twd("dot in the object's name without deploymentName", `{"metadata":{"name":"my.worker"}}`,
			"spec.workerOptions.deploymentName", "rename the TemporalWorkerDeployment or set spec.workerOptions.deploymentName"),
		twd("customBuildID with a slash", `{"spec":{"workerOptions":{"customBuildID":"team/v1"}}}`, "spec.workerOptions.customBuildID", "should match"),
		twd("customBuildID too long", `{"spec":{"workerOptions":{"customBuildID":"`+strings.Repeat("a", 64)+`"}}}`, "spec.workerOptions.customBuildID", "may not be more than 63 bytes"),
		twd("customBuildID ending in a dash", `{"spec":{"workerOptions":{"customBuildID":"v1-"}}}`, "spec.workerOptions.customBuildID", "should match"),
		twd("unknown strategy", `{"spec":{"rollout":{"strategy":"Canary"}}}`, "spec.rollout.strategy", `supported values: "Manual", "AllAtOnce", "Progressive"`),
		twd("Progressive without steps", `{"spec":{"rollout":{"strategy":"Progressive"}}}`, "spec.rollout.steps", "rollout.steps is required when rollout.strategy is Progressive"),
		twd("decreasing steps", `{"spec":{"rollout":{"strategy":"Progressive","steps":[{"rampPercentage":50,"pauseDuration":"1m"},{"rampPercentage":10,"pauseDuration":"1m"}]}}}`,
			"spec.rollout.steps", "strictly increasing"),
		twd("repeated steps", `{"spec":{"rollout":{"strategy":"Progressive","steps":[{"rampPercentage":10,"pauseDuration":"1m"},{"rampPercentage":10,"pauseDuration":"1m"}]}}}`,
			"spec.rollout.steps", "no repeated values"),
		twd("ramp of 100", `{"spec":{"rollout":{"strategy":"Progressive","steps":[{"rampPercentage":100,"pauseDuration":"1m"}]}}}`,
			"spec.rollout.steps[0].rampPercentage", "less than or equal to 99"),
		twd("ramp of 0", `{"spec":{"rollout":{"strategy":"Progressive","steps":[{"rampPercentage":0,"pauseDuration":"1m"}]}}}`,
			"spec.rollout.steps[0].rampPercentage", "greater than or equal to 1"),
		twd("21 steps", `{"spec":{"rollout":{"strategy":"Progressive","steps":`+rampSteps(21)+`}}}`, "spec.rollout.steps", "must have at most 20 items"),
		twd("pause that is no duration", `{"spec":{"rollout":{"strategy":"Progressive","steps":[{"rampPercentage":10,"pauseDuration":"soon"}]}}}`,
			"spec.rollout.steps[0].pauseDuration", "should match"),
		twd("maxSurge and maxUnavailable both 0", `{"spec":{"rollout":{"deploymentStrategy":{"maxSurge":0,"maxUnavailable":"0%"}}}}`,
			"spec.rollout.deploymentStrategy", "maxSurge and maxUnavailable cannot both be 0"),
		twd("maxSurge not a percentage", `{"spec":{"rollout":{"deploymentStrategy":{"maxSurge":"half"}}}}`,
			"spec.rollout.deploymentStrategy.maxSurge", "non-negative number or a percentage"),
		twd("negative maxUnavailable", `{"spec":{"rollout":{"deploymentStrategy":{"maxUnavailable":-1}}}}`,
			"spec.rollout.deploymentStrategy.maxUnavailable", "non-negative number or a percentage"),
		twd("gate without workflowType", gate(`{"workflowType":""}`), "spec.rollout.gate.workflowType", "at least 1 chars long"),
		twd("gate input and inputFrom", gate(`{"workflowType":"G","input":{"a":1},"inputFrom":{"configMapKeyRef":{"name":"x","key":"k"}}}`),
			"spec.rollout.gate.inputFrom", "gate.input and gate.inputFrom are mutually exclusive"),
		twd("step gate without workflowType", stepGate(`{"workflowType":""}`), "spec.rollout.steps[0].gate.workflowType", "at least 1 chars long"),
		twd("step gate input and inputFrom", stepGate(`{"workflowType":"G","input":{"a":1},"inputFrom":{"configMapKeyRef":{"name":"x","key":"k"}}}`),
			"spec.rollout.steps[0].gate.inputFrom", "gate.input and gate.inputFrom are mutually exclusive"),
		twd("step gate input not an object", stepGate(`{"workflowType":"G","input":"go"}`), "spec.rollout.steps[0].gate.input", "must be of type object"),
		twd("step gate timeout that is no duration", stepGate(`{"workflowType":"G","timeout":"1 hour"}`), "spec.rollout.steps[0].gate.timeout", "should match"),
		twd("gate inputFrom with both sources", gate(`{"workflowType":"G","inputFrom":{"configMapKeyRef":{"name":"x","key":"k"},"secretKeyRef":{"name":"y","key":"k"}}}`),
			"spec.rollout.gate.inputFrom", "exactly one of configMapKeyRef and secretKeyRef"),
		twd("gate input not an object", gate(`{"workflowType":"G","input":"go"}`), "spec.rollout.gate.input", "must be of type object"),
		twd("gate timeout that is no duration", gate(`{"workflowType":"G","timeout":"1 hour"}`), "spec.rollout.gate.timeout", "should match"),
		twd("progressDeadline under 10s", `{"spec":{"rollout":{"progressDeadline":"5s"}}}`, "spec.rollout.progressDeadline", "must be between 10s and 168h"),
		twd("progressDeadline over a week", `{"spec":{"rollout":{"progressDeadline":"200h"}}}`, "spec.rollout.progressDeadline", "must be between 10s and 168h"),
		twd("progressDeadline that is no duration", `{"spec":{"rollout":{"progressDeadline":"10 minutes"}}}`, "spec.rollout.progressDeadline", "should match"),
		twd("paused that is no bool", `{"spec":{"rollout":{"paused":"yes"}}}`, "spec.rollout.paused", "must be of type boolean"),
		twd("analysis without Progressive", `{"spec":{"rollout":{"analysis":{"checks":[{"name":"f","kind":"WorkflowFailureRate","maxPercent":5}]}}}}`,
			"spec.rollout.analysis", "needs spec.rollout.strategy Progressive"),
		twd("analysis without checks", analysis(`[]`), "spec.rollout.analysis.checks", "at least 1 items"),
		twd("analysis check names repeated", analysis(`[{"name":"f","kind":"BacklogAge","maxAge":"1m"},{"name":"f","kind":"BacklogAge","maxAge":"2m"}]`),
			"spec.rollout.analysis.checks", "name must be unique"),
		twd("failure rate with neither bound", analysis(`[{"name":"f","kind":"WorkflowFailureRate"}]`),
			"spec.rollout.analysis.checks[0].maxPercent", "exactly one of maxPercent and compare"),
		twd("failure rate with both bounds", analysis(`[{"name":"f","kind":"WorkflowFailureRate","maxPercent":5,"compare":"Current"}]`),
			"spec.rollout.analysis.checks[0].maxPercent", "exactly one of maxPercent and compare"),
		twd("margin without compare", analysis(`[{"name":"f","kind":"WorkflowFailureRate","maxPercent":5,"marginPercent":1}]`),
			"spec.rollout.analysis.checks[0].marginPercent", "marginPercent needs compare"),
		twd("backlog age without maxAge", analysis(`[{"name":"b","kind":"BacklogAge"}]`),
			"spec.rollout.analysis.checks[0].maxAge", "a BacklogAge check needs maxAge"),
		twd("maxPercent over 100", analysis(`[{"name":"f","kind":"WorkflowFailureRate","maxPercent":101}]`),
			"spec.rollout.analysis.checks[0].maxPercent", "less than or equal to 100"),
		twd("minSamples 0", analysis(`[{"name":"f","kind":"WorkflowFailureRate","maxPercent":5,"minSamples":0}]`),
			"spec.rollout.analysis.checks[0].minSamples", "greater than or equal to 1"),
		twd("unknown check kind", analysis(`[{"name":"f","kind":"Datadog"}]`), "spec.rollout.analysis.checks[0].kind", "Unsupported value"),
		twd("workflow-task check without maxPercent", analysis(`[{"name":"t","kind":"WorkflowTaskFailures"}]`),
			"spec.rollout.analysis.checks[0].maxPercent", "a WorkflowTaskFailures check needs maxPercent"),
		twd("workflow-task check with compare", analysis(`[{"name":"t","kind":"WorkflowTaskFailures","maxPercent":0,"compare":"Current"}]`),
			"spec.rollout.analysis.checks[0].maxPercent", "takes no compare or maxAge"),
		twd("step gate without Progressive", `{"spec":{"rollout":{"strategy":"AllAtOnce","steps":[{"rampPercentage":10,"pauseDuration":"1m","gate":{"workflowType":"RolloutGate"}}]}}}`,
			"spec.rollout.steps", "gate needs spec.rollout.strategy Progressive"),
		twd("Prometheus check without prometheus", analysis(`[{"name":"p","kind":"Prometheus"}]`),
			"spec.rollout.analysis.checks[0].prometheus", "a Prometheus check needs prometheus"),
		twd("prometheus on another kind", analysis(`[{"name":"b","kind":"BacklogAge","maxAge":"1m","prometheus":{"query":"vector(1)","max":"1"}}]`),
			"spec.rollout.analysis.checks[0].prometheus", "only a Prometheus check takes it"),
		twd("Prometheus check without a bound", analysis(`[{"name":"p","kind":"Prometheus","prometheus":{"query":"vector(1)"}}]`),
			"spec.rollout.analysis.checks[0].prometheus.max", "needs max or min"),
		twd("Prometheus check without a query", analysis(`[{"name":"p","kind":"Prometheus","prometheus":{"max":"1"}}]`),
			"spec.rollout.analysis.checks[0].prometheus.query", "Required value"),
		twd("Prometheus bound not a number", analysis(`[{"name":"p","kind":"Prometheus","prometheus":{"query":"vector(1)","max":"1e3"}}]`),
			"spec.rollout.analysis.checks[0].prometheus.max", "should match"),
		twd("Prometheus check with maxPercent", analysis(`[{"name":"p","kind":"Prometheus","maxPercent":5,"prometheus":{"query":"vector(1)","max":"1"}}]`),
			"spec.rollout.analysis.checks[0].maxPercent", "a Prometheus check takes its bounds in prometheus.max"),
		twd("Prometheus check with compare", analysis(`[{"name":"p","kind":"Prometheus","compare":"Current","prometheus":{"query":"vector(1)","max":"1"}}]`),
			"spec.rollout.analysis.checks[0].compare", "a Prometheus check takes its bounds in prometheus.max"),
		twd("Prometheus check with maxAge", analysis(`[{"name":"p","kind":"Prometheus","maxAge":"1m","prometheus":{"query":"vector(1)","max":"1"}}]`),
			"spec.rollout.analysis.checks[0].maxAge", "maxAge is for BacklogAge checks only"),
		// The webhook: a query template the controller could not render.
		twd("Prometheus query naming an unknown field", analysis(`[{"name":"p","kind":"Prometheus","prometheus":{"query":"x{b=\"{{ .Build }}\"}","max":"1"}}]`),
			"spec.rollout.analysis.checks[0].prometheus.query", "not a template the controller can render"),
		twd("Prometheus query that does not parse", analysis(`[{"name":"p","kind":"Prometheus","prometheus":{"query":"x{b=\"{{ .BuildID \"}","max":"1"}}]`),
			"spec.rollout.analysis.checks[0].prometheus.query", "not a template the controller can render"),
		twd("analysis interval under 5s", `{"spec":{"rollout":{"strategy":"Progressive","steps":[{"rampPercentage":10,"pauseDuration":"1m"}],`+
			`"analysis":{"interval":"1s","checks":[{"name":"b","kind":"BacklogAge","maxAge":"1m"}]}}}}`,
			"spec.rollout.analysis.interval", "must be between 5s and 1h"),
		twd("deployment label under temporal.io/", `{"spec":{"deploymentMetadata":{"labels":{"temporal.io/build-id":"x"}}}}`,
			"spec.deploymentMetadata.labels", "keys under temporal.io/ are the controller's"),
		twd("deployment annotation under temporal.io/", `{"spec":{"deploymentMetadata":{"annotations":{"temporal.io/scaled-down-at":"x"}}}}`,
			"spec.deploymentMetadata.annotations", "keys under temporal.io/ are the controller's"),
		twd("negative scaledownDelay", `{"spec":{"sunset":{"scaledownDelay":"-1h"}}}`, "spec.sunset.scaledownDelay", "should match"),
		twd("drainAction without maxDrainDuration", `{"spec":{"sunset":{"drainAction":"Cancel"}}}`,
			"spec.sunset.drainAction", "spec.sunset.drainAction needs spec.sunset.maxDrainDuration"),
		twd("unknown drainAction", `{"spec":{"sunset":{"maxDrainDuration":"1h","drainAction":"Kill"}}}`, "spec.sunset.drainAction", `supported values: "DryRun", "Cancel", "Terminate"`),
		twd("continue-as-new signal without a name", `{"spec":{"sunset":{"continueAsNewSignal":{"input":1}}}}`, "spec.sunset.continueAsNewSignal.name", "Required value"),
		twd("unknown deletion policy", `{"spec":{"deletion":{"policy":"Never"}}}`, "spec.deletion.policy", `supported values: "WaitForDrain", "Immediate"`),
		twd("maxDrainWait that is no duration", `{"spec":{"deletion":{"maxDrainWait":"tomorrow"}}}`, "spec.deletion.maxDrainWait", "should match"),
		update(twd("temporalNamespace changed", `{"spec":{"workerOptions":{"temporalNamespace":"other"}}}`,
			"spec.workerOptions.temporalNamespace", "spec.workerOptions.temporalNamespace is immutable")),
		update(twd("deploymentName set", `{"spec":{"workerOptions":{"deploymentName":"renamed"}}}`,
			"spec.workerOptions.deploymentName", "spec.workerOptions.deploymentName is immutable")),
		update(twd("Progressive without steps", `{"spec":{"rollout":{"strategy":"Progressive"}}}`, "spec.rollout.steps", "rollout.steps is required")),

		// TemporalConnection.
		conn("no hostPort", `{"spec":{"hostPort":null}}`, "spec.hostPort", "Required value"),
		conn("host without port", `{"spec":{"hostPort":"temporal"}}`, "spec.hostPort", "should match"),
		conn("a URL", `{"spec":{"hostPort":"https://temporal:7233"}}`, "spec.hostPort", "should match"),
		conn("port above 65535", `{"spec":{"hostPort":"temporal:72330"}}`, "spec.hostPort", "the port must be a number from 1 to 65535"),
		conn("port 0", `{"spec":{"hostPort":"temporal:0"}}`, "spec.hostPort", "the port must be a number from 1 to 65535"),
		// The webhook: outside the manager's --allowed-temporal-hosts.
		conn("address not allowed", `{"spec":{"hostPort":"attacker.test:7233"}}`, "spec.hostPort", "is not one of the addresses this controller may connect to"),
		update(conn("address not allowed", `{"spec":{"hostPort":"temporal.example.com:7234"}}`, "spec.hostPort", "use an allowed address")),
		conn("mTLS and API key", `{"spec":{"mutualTLSSecretRef":{"name":"tls"},"apiKeySecretRef":{"name":"key","key":"k"}}}`,
			"spec.mutualTLSSecretRef", "mutualTLSSecretRef and apiKeySecretRef are mutually exclusive"),
		conn("API key without a key", `{"spec":{"apiKeySecretRef":{"name":"key"}}}`, "spec.apiKeySecretRef.key", "Required value"),
		conn("mTLS Secret without a name", `{"spec":{"mutualTLSSecretRef":{"name":""}}}`, "spec.mutualTLSSecretRef.name", "at least 1 chars long"),
		update(conn("mTLS added to an API key", `{"spec":{"apiKeySecretRef":{"name":"key","key":"k"},"mutualTLSSecretRef":{"name":"tls"}}}`,
			"spec.mutualTLSSecretRef", "mutually exclusive")),

		// TemporalWorkerOwnedResource: its schema, then the webhook.
		twor("object not an object", `"an HPA"`, "spec.object", "must be of type object"),
		{name: "twor/no workerRef name", base: tableTWOR, patch: `{"spec":{"workerRef":{"name":""}}}`, field: "spec.workerRef.name", message: "at least 1 chars long"},
		twor("no apiVersion", `{"apiVersion":null}`, "spec.object.apiVersion", "Required value"),
		twor("no kind", `{"kind":null}`, "spec.object.kind", "Required value"),
		twor("malformed apiVersion", `{"apiVersion":"a/b/c"}`, "spec.object.apiVersion", "unexpected GroupVersion string"),
		twor("metadata.name", `{"metadata":{"name":"mine"}}`, "spec.object.metadata.name", "the controller names each version's copy"),
		twor("metadata.namespace", `{"metadata":{"namespace":"other"}}`, "spec.object.metadata.namespace", "copies are made in the TemporalWorkerOwnedResource's namespace"),
		twor("labels not strings", `{"metadata":{"labels":{"replicas":3}}}`, "spec.object.metadata.labels[replicas]", "must be a string"),
		twor("a Deployment", `{"apiVersion":"apps/v1","kind":"Deployment","spec":null}`, "spec.object.kind", "Deployment objects cannot be attached"),
		twor("a CronJob", `{"apiVersion":"batch/v1","kind":"CronJob","spec":null}`, "spec.object.kind", "CronJob objects cannot be attached"),
		twor("an unknown kind", `{"apiVersion":"example.com/v1","kind":"Gadget"}`, "spec.object.kind", "unknown kind: the API server serves no Gadget in example.com/v1"),
		twor("an unknown version", `{"apiVersion":"autoscaling/v9"}`, "spec.object.kind", "unknown kind"),
		twor("a cluster-scoped kind", `{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","spec":null}`, "spec.object.kind", "cluster-scoped kind"),
		twor("a RoleBinding", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","spec":null}`, "spec.object.kind", "RBAC kinds are always banned"),
		twor("a ClusterRole", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","spec":null}`, "spec.object.kind", "RBAC kinds are always banned"),
		twor("minReplicas 0", `{"spec":{"minReplicas":0}}`, "spec.object.spec.minReplicas", "could strand the workflows pinned to it"),
		twor("scaleTargetRef set", `{"spec":{"scaleTargetRef":{"kind":"Deployment","name":"x"}}}`, "spec.object.spec.scaleTargetRef", "must be null, {} or absent"),
		twor("matchLabels set", `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"x"}}}}`,
			"spec.object.spec.selector.matchLabels", "must be null, {} or absent"),
		twor("a template that does not parse", `{"spec":{"metrics":[{"type":"External","external":{"metric":{"name":"{{ .BuildID"}}}]}}`,
			"spec.object.spec.metrics[0].external.metric.name", "unclosed action"),
		twor("a template naming an unknown field", `{"metadata":{"labels":{"ns":"{{ .Namespace }}"}}}`, "spec.object.metadata.labels.ns", "unknown field .Namespace"),
		twor("a template with range", `{"metadata":{"annotations":{"a":"{{ range 9 }}x{{ end }}"}}}`, "spec.object.metadata.annotations.a", "range is not supported"),
		twor("a template doubling a value 40 times", `{"metadata":{"annotations":{"a":"`+strings.ReplaceAll(bombTemplate, `"`, `\"`)+`"}}}`,
			"spec.object.metadata.annotations.a", "print, printf and println may make at most 1048576 bytes for one object"),
		twor("a template with html", `{"metadata":{"annotations":{"a":"{{ html .BuildID }}"}}}`, "spec.object.metadata.annotations.a", `function "html" is not available`),
		update(twor("changed to a Pod", `{"apiVersion":"v1","kind":"Pod","spec":null}`, "spec.object.kind", "Pod objects cannot be attached")),
		update(admissionRow{name: "twor/workerRef changed", base: tableTWOR, patch: `{"spec":{"workerRef":{"name":"another"}}}`,
			field: "spec.workerRef", message: "spec.workerRef is immutable"}),
	}
}

// TestAdmissionTable sends every row to the API server, as a dry run, and
// checks the refusal's causes. The objects an update row needs are
// created first, one of each kind.
func TestAdmissionTable(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	rows := admissionTable()
	if len(rows) < 30 {
		t.Fatalf("%d rows, the table promises at least 30", len(rows))
	}
	stored := map[string]*unstructured.Unstructured{}
	for _, r := range rows {
		if !r.update || stored[r.base] != nil {
			continue
		}
		u := tableObject(t, tt.Namespace, r.base, "")
		if err := env.Kube.Create(ctx, u); err != nil {
			t.Fatalf("create the valid %s: %v", u.GetKind(), err)
		}
		stored[r.base] = u
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var err error
			if r.update {
				err = env.Kube.Patch(ctx, stored[r.base].DeepCopy(), crclient.RawPatch(types.MergePatchType, []byte(r.patch)), crclient.DryRunAll)
			} else {
				err = env.Kube.Create(ctx, tableObject(t, tt.Namespace, r.base, r.patch), crclient.DryRunAll)
			}
			if msg := refusal(err, r.field, r.message); msg != "" {
				t.Error(msg)
			}
		})
	}
	// The valid objects are admitted (a dry run: the table's own are
	// stored already).
	for _, base := range []string{tableTWD, tableConnection, tableTWOR} {
		if err := env.Kube.Create(ctx, tableObject(t, tt.Namespace, base, `{"metadata":{"name":"valid"}}`), crclient.DryRunAll); err != nil {
			t.Errorf("a valid object refused: %v", err)
		}
	}
}

// refusal says what is wrong with err as the refusal of a row; "" if it
// is one: Invalid, with a cause on field holding message.
func refusal(err error, field, message string) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		return fmt.Sprintf("got %v, want Invalid naming %s", errString(err), field)
	}
	var causes []string
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Field == field && strings.Contains(c.Message, message) {
				return ""
			}
			causes = append(causes, fmt.Sprintf("%s: %s", c.Field, c.Message))
		}
	}
	return fmt.Sprintf("want a cause on %s with %q, got:\n  %s", field, message, strings.Join(causes, "\n  "))
}

// tableObject is base with patch merged in, in namespace ns.
func tableObject(t *testing.T, ns, base, patch string) *unstructured.Unstructured {
	t.Helper()
	var obj, p map[string]any
	if err := json.Unmarshal([]byte(base), &obj); err != nil {
		t.Fatal(err)
	}
	if patch != "" {
		if err := json.Unmarshal([]byte(patch), &p); err != nil {
			t.Fatalf("patch %s: %v", patch, err)
		}
		obj = applyMergePatch(obj, p)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetNamespace(ns)
	return u
}

// applyMergePatch applies a JSON merge patch (RFC 7386): objects merge, null
// removes, anything else replaces.
func applyMergePatch(target, patch map[string]any) map[string]any {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(target, k)
		case map[string]any:
			tv, _ := target[k].(map[string]any)
			if tv == nil {
				tv = map[string]any{}
			}
			target[k] = applyMergePatch(tv, pv)
		default:
			target[k] = v
		}
	}
	return target
}

// TestAdmissionLeavesToConditions: what admission cannot know, because it
// depends on other objects, is reported in the Ready condition with a
// reason and the field to fix. (A missing TemporalConnection or Secret:
// TestMissingConnectionThenBadSecret and TestConnectionSecretProblems; an
// unreachable server: TestConnectionUnreachable; a template that fails for
// one version only: TestOwnedResourcesFollowVersions.)
func TestAdmissionLeavesToConditions(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	twor := ownedResource(tt.Namespace, "orphan", admissionHPA)
	twor.Spec.WorkerRef.Name = "nobody"
	if err := env.Kube.Create(ctx, twor); err != nil {
		t.Fatal(err)
	}
	tt.Eventually(time.Minute, "Ready False, WorkerDeploymentNotFound, naming spec.workerRef", func() (bool, string) {
		if err := env.Kube.Get(ctx, crclient.ObjectKeyFromObject(twor), twor); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(twor.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonWorkerDeploymentNotFound &&
			strings.Contains(c.Message, "spec.workerRef.name"), fmt.Sprintf("%+v", twor.Status.Conditions)
	})
}
