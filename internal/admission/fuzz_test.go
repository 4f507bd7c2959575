package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
)

// fuzzSeeds are spec.objects the fuzzer starts from: good ones and one of
// each kind of mistake.
var fuzzSeeds = []string{
	goodHPA, goodPDB, `{}`, `[1]`, `null`, `"x"`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"a":"{{ .BuildID }}"},"annotations":{"b":1}},"data":{"x":"{{ .Nope }}"}}`,
	`{"kind":"Pod","metadata":{"name":"a","namespace":"b"},"spec":{"minReplicas":0,"scaleTargetRef":{},"selector":{"matchLabels":{"a":"b"}}}}`,
	`{"apiVersion":"a/b/c","kind":3,"spec":{"triggers":[{"scaleTargetRef":null},{"matchLabels":"z"}]}}`,
	`{"apiVersion":"v1","kind":"X","a":"{{ range 9 }}{{ end }}","b":"{{ index .BuildID 99 }}","c":"{{ with .BuildID }}{{ .X }}{{ end }}"}`,
	// As kubectl apply without --server-side leaves them, and with {}.
	`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":5}}`,
	`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{}}}`,
	`{"apiVersion":"x/v1","kind":"Y","spec":{"scaleTargetRef":{},"triggers":[{"matchLabels":{}}]}}`,
	`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","spec":{"maxReplicas":3,"metrics":[{"type":"External","external":{"metric":{"name":"m","selector":{"matchLabels":{"a":"{{ .BuildID }}"}}}}}]}}`,
}

// FuzzValidate checks the webhook's rules on arbitrary spec.objects: no
// panic, the same errors every time, each naming a field under spec, the
// workerRef rule exactly on a changed workerRef, and every object the
// rules admit renders for a version, failing at most on a template whose
// result, or a bound it breaks, depends on the version's values.
func FuzzValidate(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzSeeds[(i+1)%len(fuzzSeeds)], i%3 == 0)
	}
	f.Fuzz(func(t *testing.T, object, oldObject string, workerChanged bool) {
		obj := twor("w", object)
		var old *v1alpha1.TemporalWorkerOwnedResource
		if oldObject != "" {
			old = twor("w", oldObject)
			if workerChanged {
				old.Spec.WorkerRef.Name = "other"
			}
		}
		errs := Validate(obj, old, DefaultBannedKinds)
		if again := Validate(twor("w", object), old, DefaultBannedKinds); fmt.Sprint(errs) != fmt.Sprint(again) {
			t.Fatalf("not deterministic:\n%v\n%v", errs, again)
		}
		workerErr := false
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "spec.object") && e.Field != "spec.workerRef.name" {
				t.Errorf("error on %q, want a field under spec.object: %v", e.Field, e)
			}
			workerErr = workerErr || e.Field == "spec.workerRef.name"
		}
		if want := old != nil && workerChanged; workerErr != want {
			t.Errorf("workerRef error = %v, want %v: %v", workerErr, want, errs)
		}
		if !specUnchanged(obj, obj.DeepCopy()) && errs.ToAggregate() == nil {
			t.Errorf("an admitted object differs from its own copy")
		}
		if len(errs) > 0 {
			return
		}
		if _, ok := ObjectGVK(obj); !ok {
			t.Fatalf("admitted, but ObjectGVK fails for %s", object)
		}
		var decoded map[string]any
		if err := json.Unmarshal([]byte(object), &decoded); err != nil {
			t.Fatalf("admitted, but not a JSON object: %v", err)
		}
		u, err := ownedresource.Render(decoded, fuzzTarget)
		if err != nil {
			if !strings.Contains(err.Error(), `executing "value"`) && !errors.Is(err, ownedresource.ErrBound) {
				t.Fatalf("admitted, but cannot render for any version: %v", err)
			}
			return
		}
		// The controller fills in every sentinel: none is left as the user
		// could have set it, but the metric selectors that are theirs.
		checkSentinels(t, u.Object, "", metricSelectors(decoded))
	})
}

var fuzzTarget = ownedresource.Target{Namespace: "ns", WorkerDeployment: "w", OwnedResource: "r", BuildID: "v1-abc",
	DeploymentName: "w-v1-abc", DeploymentUID: "uid", TemporalNamespace: "default", TemporalDeploymentName: "ns/w"}

func checkSentinels(t *testing.T, v any, path string, own map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			p := path + "." + k
			switch {
			case own[objectPath.String()+p]:
			case k == "scaleTargetRef" && !reflect.DeepEqual(c, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": fuzzTarget.DeploymentName}):
				t.Errorf("%s rendered as %v, not the version's Deployment", p, c)
			case k == "matchLabels" && path != ".metadata" && fmt.Sprint(c) != "map[temporal.io/build-id:v1-abc temporal.io/worker-deployment:w]":
				t.Errorf("%s rendered as %v, not the version's selector", p, c)
			default:
				checkSentinels(t, c, p, own)
			}
		}
	case []any:
		for i, c := range v {
			checkSentinels(t, c, fmt.Sprintf("%s[%d]", path, i), own)
		}
	}
}

const fuzzTWOR = `{"apiVersion":"temporal.io/v1alpha1","kind":"TemporalWorkerOwnedResource","spec":{"workerRef":{"name":"w"},"object":`

// FuzzHandle sends arbitrary bytes as the objects of an admission request
// to the webhook, with a reviewer that allows everything: it must answer
// every request without a panic, never with an internal error (nothing it
// calls fails here), deny only with a code and a message, and admit a
// create or a changed spec only if Validate does.
func FuzzHandle(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), []byte(fuzzTWOR+s+`}}`), []byte(fuzzTWOR+goodHPA+`}}`))
	}
	f.Add(uint8(0), []byte(`{`), []byte(nil))
	// kubectl's client-side apply: a dropped null the annotation still has.
	f.Add(uint8(0), []byte(`{"apiVersion":"temporal.io/v1alpha1","kind":"TemporalWorkerOwnedResource","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":`+
		`"{\"spec\":{\"object\":{\"spec\":{\"a\":{\"scaleTargetRef\":null}}}}}"}},"spec":{"workerRef":{"name":"w"},"object":{"apiVersion":"x/v1","kind":"Y","spec":{"a":{}}}}}`), []byte(nil))
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	ops := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect}
	// One validator for all executions (its decoder is costly to build);
	// a fresh reviewer each time, so that recorded reviews do not pile up.
	v := NewValidator(scheme, testMapper(), nil, StaticIdentity(ServiceAccountIdentity("rainbow-system", "rainbow-manager")), DefaultBannedKinds)
	f.Fuzz(func(t *testing.T, op uint8, object, oldObject []byte) {
		v.Access = allowAll()
		req := cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: ops[int(op)%len(ops)], Name: "r", Namespace: "ns",
			Object: runtime.RawExtension{Raw: object}, OldObject: runtime.RawExtension{Raw: oldObject},
			UserInfo: authenticationv1.UserInfo{Username: "alice"},
		}}
		resp := v.Handle(context.Background(), req)
		if !resp.Allowed {
			if resp.Result == nil || resp.Result.Code == 0 || resp.Result.Message == "" {
				t.Fatalf("denied without a code or message: %+v", resp.Result)
			}
			if resp.Result.Code == http.StatusInternalServerError {
				t.Fatalf("internal error: %s", resp.Result.Message)
			}
			return
		}
		if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
			return
		}
		// Decoded as the webhook decodes them (case-sensitive keys).
		var obj, old v1alpha1.TemporalWorkerOwnedResource
		if len(object) == 0 || v.Decoder.DecodeRaw(req.Object, &obj) != nil {
			return // nothing to admit or refuse
		}
		var oldp *v1alpha1.TemporalWorkerOwnedResource
		if req.Operation == admissionv1.Update {
			if len(oldObject) == 0 || v.Decoder.DecodeRaw(req.OldObject, &old) != nil {
				return
			}
			if specUnchanged(&obj, &old) {
				return
			}
			oldp = &old
		}
		if errs := Validate(&obj, oldp, DefaultBannedKinds); len(errs) > 0 {
			t.Fatalf("admitted, yet Validate refuses it: %v", errs)
		}
	})
}
