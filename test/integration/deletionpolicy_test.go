package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// TestDeletionPolicyRules evaluates the rules of config/crd/deletion-policy.yaml
// on requests the API server cannot be made to send here: a DELETE of a TWD
// that has the foregroundDeletion or orphan finalizer already (from before
// the policy was installed). TestDeletionPolicyRefusesGCFinalizers sends the
// others through the API server.
func TestDeletionPolicyRules(t *testing.T) {
	parallel(t)
	policy := shippedDeletionPolicy(t)
	twd := func(finalizers ...string) map[string]any {
		fs := make([]any, len(finalizers))
		for i, f := range finalizers {
			fs[i] = f
		}
		return map[string]any{"metadata": map[string]any{"name": "w", "finalizers": fs}}
	}
	background := map[string]any{"propagationPolicy": "Background"}
	cases := map[string]struct {
		op          string
		object, old map[string]any
		options     map[string]any
		// refused holds the refusal's message; empty means admitted.
		refused string
	}{
		"plain delete":                           {op: "DELETE", old: twd("temporal.io/worker-deployment-cleanup"), options: map[string]any{}},
		"background delete":                      {op: "DELETE", old: twd(), options: background},
		"foreground delete":                      {op: "DELETE", old: twd(), options: map[string]any{"propagationPolicy": "Foreground"}, refused: "propagationPolicy Foreground is refused"},
		"orphanDependents delete":                {op: "DELETE", old: twd(), options: map[string]any{"orphanDependents": true}, refused: "orphanDependents is refused"},
		"plain delete with foregroundDeletion":   {op: "DELETE", old: twd("foregroundDeletion"), options: map[string]any{}, refused: "has the finalizer(s) foregroundDeletion"},
		"plain delete with orphan":               {op: "DELETE", old: twd("a", "orphan"), options: map[string]any{}, refused: "has the finalizer(s) orphan"},
		"background delete drops the finalizers": {op: "DELETE", old: twd("orphan", "foregroundDeletion"), options: background},
		"create":                                 {op: "CREATE", object: twd(), options: map[string]any{}},
		"create without finalizers":              {op: "CREATE", object: map[string]any{"metadata": map[string]any{"name": "w"}}, options: map[string]any{}},
		"create with orphan":                     {op: "CREATE", object: twd("orphan"), options: map[string]any{}, refused: "metadata.finalizers: orphan is refused"},
		"the controller's finalizer added":       {op: "UPDATE", object: twd("temporal.io/worker-deployment-cleanup"), old: twd(), options: map[string]any{}},
		"foregroundDeletion added":               {op: "UPDATE", object: twd("x", "foregroundDeletion"), old: twd("x"), options: map[string]any{}, refused: "metadata.finalizers: foregroundDeletion is refused"},
		"orphan added to none":                   {op: "UPDATE", object: twd("orphan"), old: map[string]any{"metadata": map[string]any{}}, options: map[string]any{}, refused: "metadata.finalizers: orphan is refused"},
		"one already there, another removed":     {op: "UPDATE", object: twd("orphan"), old: twd("orphan", "x"), options: map[string]any{}},
		"foregroundDeletion removed by the GC":   {op: "UPDATE", object: twd("x"), old: twd("x", "foregroundDeletion"), options: map[string]any{}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			vars := map[string]any{
				"object": c.object, "oldObject": c.old,
				"request": map[string]any{"operation": c.op, "name": "w", "options": c.options},
			}
			if c.object == nil {
				vars["object"] = nil
			}
			if c.old == nil {
				vars["oldObject"] = nil
			}
			vars["variables"] = map[string]any{}
			for _, v := range policy.Spec.Variables {
				vars["variables"].(map[string]any)[v.Name] = evalPolicyCEL(t, v.Expression, vars).Value()
			}
			refusal := ""
			for _, v := range policy.Spec.Validations {
				if evalPolicyCEL(t, v.Expression, vars).Value() == true {
					continue
				}
				refusal = v.Message
				if v.MessageExpression != "" {
					refusal = evalPolicyCEL(t, v.MessageExpression, vars).Value().(string)
				}
				break
			}
			if (c.refused == "") != (refusal == "") || !strings.Contains(refusal, c.refused) {
				t.Errorf("refusal %q, want %q", refusal, c.refused)
			}
		})
	}
}

func shippedDeletionPolicy(t *testing.T) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "deletion-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.Unmarshal([]byte(strings.Split(string(data), "\n---\n")[0]), &p); err != nil {
		t.Fatal(err)
	}
	if p.Kind != "ValidatingAdmissionPolicy" || len(p.Spec.Validations) == 0 {
		t.Fatalf("config/crd/deletion-policy.yaml starts with %s %s", p.Kind, p.Name)
	}
	return &p
}

// evalPolicyCEL evaluates expr as the API server does a policy's, but
// with its variables untyped.
func evalPolicyCEL(t *testing.T, expr string, vars map[string]any) ref.Val {
	t.Helper()
	env, err := cel.NewEnv(ext.Strings(), ext.Sets(), cel.HomogeneousAggregateLiterals(),
		cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType), cel.Variable("variables", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compile %q: %v", expr, iss.Err())
	}
	prog, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := prog.Eval(vars)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	return v
}
