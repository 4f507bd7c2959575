package integration

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/dev/localenv/temporalauth"
	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// The tests of this file run against a Temporal server that refuses what
// is wrong: a devenv of their own with --temporal-tls=mtls or
// --temporal-auth=api-key, and the manager binary against it, as a user
// runs them (the shared environment's Temporal is plaintext).

// TestMutualTLS: the controller and its workers (through the env it
// injects) connect with the client certificate devenv put in Secret
// default/temporal-client and a rollout completes; a wrong CA, an expired
// or unknown client certificate and a wrong server name each give the
// documented reason and a message that says what to fix; while the
// connection fails nothing is scaled down; a rotated certificate is
// picked up by the controller and the workers, losing no workflow.
func TestMutualTLS(t *testing.T) {
	parallel(t)
	own := secureEnv(t, "--temporal-tls=mtls")
	tt := own.NewTest(t)
	auth, err := own.Authority()
	if err != nil {
		t.Fatal(err)
	}
	if !own.Info.TemporalTLS.ClientAuth || own.Info.TemporalSecrets == nil {
		t.Fatalf("env.json does not describe the mTLS server: %+v", own.Info)
	}
	good := defaultSecret(tt, own.Info.TemporalSecrets.MutualTLS)
	if good.Type != corev1.SecretTypeTLS || len(good.Data["ca.crt"]) == 0 {
		t.Fatalf("Secret default/%s is %s with keys %v; docs/connections.md asks for kubernetes.io/tls with ca.crt", good.Name, good.Type, slices.Sorted(maps.Keys(good.Data)))
	}
	specFor := func(secret string) v1.TemporalConnectionSpec {
		return v1.TemporalConnectionSpec{HostPort: own.Info.TemporalAddress, MutualTLSSecretRef: &v1.SecretReference{Name: secret}}
	}
	r, v1Build := rollOutOver(tt, good, specFor(good.Name), "over TLS with the client certificate in Secret "+good.Name)

	t.Run("RefusedCredentials", func(t *testing.T) {
		st := sub(t, tt)
		other := newAuthority(t)
		now := time.Now()
		expired, expiredKey, err := auth.ClientCert("expired", now.Add(-48*time.Hour), now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		unknown, unknownKey, err := other.ClientCert("unknown", now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		wrongName := specFor("wrong-server-name")
		wrongName.TLSServerName = "wrong.example"
		refusals(st, good, specFor, map[string]credentialCase{
			"wrong-ca": {edit: map[string][]byte{"ca.crt": other.CAPEM}, reason: v1.ReasonTemporalClientCreationFailed,
				message: []string{"not signed by", `ca.crt in Secret wrong-ca`}},
			"expired-cert": {edit: map[string][]byte{"tls.crt": expired, "tls.key": expiredKey}, reason: v1.ReasonAuthSecretInvalid,
				message: []string{"Secret expired-cert", "expired", "renew it"}},
			"unknown-cert": {edit: map[string][]byte{"tls.crt": unknown, "tls.key": unknownKey}, reason: v1.ReasonTemporalClientCreationFailed,
				message: []string{"refused the client certificate", "Secret unknown-cert"}},
			"wrong-server-name": {spec: &wrongName, reason: v1.ReasonTemporalClientCreationFailed,
				message: []string{`"wrong.example"`, "spec.tlsServerName", "localhost"}},
		})
	})

	t.Run("FailingConnectionScalesNothingDown", func(t *testing.T) {
		st := sub(t, tt)
		sr := &rollout{&harness.Rollout{T: st, Name: r.Name, TaskQueue: r.TaskQueue}}
		now := time.Now()
		unknown, unknownKey, err := newAuthority(t).ClientCert("unknown", now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		bad := maps.Clone(good.Data)
		bad["tls.crt"], bad["tls.key"] = unknown, unknownKey
		failing(st, sr, v1Build, good.Name, good.Type, bad)
		putSecret(st, good.Name, good.Type, good.Data)
		sr.WaitCurrent(5*time.Minute, v1Build)
	})

	t.Run("RotationKeepsWorkersAndRollouts", func(t *testing.T) {
		now := time.Now().Add(-time.Minute)
		crt, key, err := auth.ClientCert("rotated", now, now.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		rotated := maps.Clone(good.Data)
		rotated["tls.crt"], rotated["tls.key"] = crt, key
		rotate(sub(t, tt), r, v1Build, good.Name, good.Type, rotated)
	})
}

// TestAPIKey is TestMutualTLS with an API key: a server that refuses every
// request without a key devenv signed, a Secret holding the key and the
// server's CA, a bad key, a key from another issuer and a wrong CA, and a
// rotated key.
func TestAPIKey(t *testing.T) {
	parallel(t)
	own := secureEnv(t, "--temporal-auth=api-key")
	tt := own.NewTest(t)
	auth, err := own.Authority()
	if err != nil {
		t.Fatal(err)
	}
	names := own.Info.TemporalSecrets
	if own.Info.TemporalAPIKey == "" || names == nil || names.APIKey == "" {
		t.Fatalf("env.json does not describe the API key: %+v", own.Info)
	}
	good := defaultSecret(tt, names.APIKey)
	if string(good.Data[names.APIKeyKey]) != own.Info.TemporalAPIKey || len(good.Data["ca.crt"]) == 0 {
		t.Fatalf("Secret default/%s has keys %v, want the API key under %q and the CA under ca.crt", good.Name, slices.Sorted(maps.Keys(good.Data)), names.APIKeyKey)
	}
	specFor := func(secret string) v1.TemporalConnectionSpec {
		return v1.TemporalConnectionSpec{HostPort: own.Info.TemporalAddress, APIKeySecretRef: &v1.SecretKeyReference{Name: secret, Key: names.APIKeyKey}}
	}
	r, v1Build := rollOutOver(tt, good, specFor(good.Name), "over TLS with the API key in Secret "+good.Name)

	t.Run("RefusedCredentials", func(t *testing.T) {
		st := sub(t, tt)
		other := newAuthority(t)
		foreign, err := other.APIKey("intruder", []string{own.Info.TemporalNamespace + ":admin"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		refused := v1.ReasonTemporalClientCreationFailed
		refusals(st, good, specFor, map[string]credentialCase{
			"bad-key":     {edit: map[string][]byte{names.APIKeyKey: []byte("not-a-key")}, reason: refused, message: []string{"refused the API key", "Secret bad-key"}},
			"foreign-key": {edit: map[string][]byte{names.APIKeyKey: []byte(foreign)}, reason: refused, message: []string{"refused the API key", "Secret foreign-key"}},
			"wrong-ca":    {edit: map[string][]byte{"ca.crt": other.CAPEM}, reason: refused, message: []string{"not signed by", "ca.crt in Secret wrong-ca"}},
		})
	})

	t.Run("FailingConnectionScalesNothingDown", func(t *testing.T) {
		st := sub(t, tt)
		sr := &rollout{&harness.Rollout{T: st, Name: r.Name, TaskQueue: r.TaskQueue}}
		bad := maps.Clone(good.Data)
		bad[names.APIKeyKey] = []byte("revoked")
		failing(st, sr, v1Build, good.Name, good.Type, bad)
		putSecret(st, good.Name, good.Type, good.Data)
		sr.WaitCurrent(5*time.Minute, v1Build)
	})

	t.Run("RotationKeepsWorkersAndRollouts", func(t *testing.T) {
		key, err := auth.APIKey("rotated", []string{own.Info.TemporalNamespace + ":admin"}, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rotated := maps.Clone(good.Data)
		rotated[names.APIKeyKey] = []byte(key)
		rotate(sub(t, tt), r, v1Build, good.Name, good.Type, rotated)
	})
}

// rollOutOver stores good in the test's namespace, makes the connection
// spec with it and rolls out v1 of the demo worker through it.
func rollOutOver(tt *harness.T, good *corev1.Secret, spec v1.TemporalConnectionSpec, reachable string) (*rollout, string) {
	tt.Helper()
	putSecret(tt, good.Name, good.Type, good.Data)
	newConnection(tt, harness.ConnectionName, spec)
	waitReady(tt, harness.ConnectionName, v1.ReasonReachable, time.Minute, reachable)
	r := &rollout{tt.NewRollout("worker")}
	build := r.Create(r.Spec("v1"))
	r.WaitCurrent(3*time.Minute, build)
	if got := r.hello(); !strings.Contains(got, build) {
		tt.Fatalf("Hello ran on %q, want build %s", got, build)
	}
	return r, build
}

// credentialCase is one wrong credential: good's data with edit, or good as it
// is with spec, and what the connection must report.
type credentialCase struct {
	edit    map[string][]byte
	spec    *v1.TemporalConnectionSpec
	reason  string
	message []string
}

// refusals makes a Secret and a connection for each case, named by it.
func refusals(st *harness.T, good *corev1.Secret, specFor func(secret string) v1.TemporalConnectionSpec, cases map[string]credentialCase) {
	for name, tc := range cases {
		data := maps.Clone(good.Data)
		maps.Copy(data, tc.edit)
		putSecret(st, name, good.Type, data)
		spec := specFor(name)
		if tc.spec != nil {
			spec = *tc.spec
		}
		newConnection(st, name, spec)
	}
	for name, tc := range cases {
		st.Run(name, func(t *testing.T) {
			waitReady(sub(t, st), name, tc.reason, time.Minute, tc.message...)
		})
	}
}

// failing writes credentials the server refuses into Secret name and
// checks that the TWD says so while build keeps its ready workers, on the
// credentials they started with.
func failing(st *harness.T, sr *rollout, build, name string, typ corev1.SecretType, bad map[string][]byte) {
	st.Helper()
	hash := sr.deployment(build).Spec.Template.Annotations[workload.AnnotationConnectionHash]
	putSecret(st, name, typ, bad)
	twd := sr.waitCondition(2*time.Minute, v1.ConditionReady, metav1.ConditionFalse, v1.ReasonTemporalClientCreationFailed)
	if c := findCondition(twd, v1.ConditionReady); !strings.Contains(c.Message, "the server refused the") {
		st.Errorf("Ready message %q does not say which credential the server refused", c.Message)
	}
	sr.holdsWorkers(15*time.Second, build)
	d := sr.deployment(build)
	if d.Status.ReadyReplicas < 1 {
		st.Fatalf("the running version has no ready worker while the connection fails: %s", deploymentState(d))
	}
	if got := d.Spec.Template.Annotations[workload.AnnotationConnectionHash]; got != hash {
		st.Errorf("the workers were rolled to credentials the server refuses (connection hash %s -> %s)", hash, got)
	}
	// The workers that still poll keep serving.
	if got := sr.hello(); !strings.Contains(got, build) {
		st.Fatalf("Hello ran on %q, want build %s", got, build)
	}
}

// rotate writes rotated into Secret name while workflows run on build,
// and checks that build's pods roll to it with no workflow lost, and that
// a rollout to a new version then completes.
func rotate(st *harness.T, r *rollout, build, name string, typ corev1.SecretType, rotated map[string][]byte) {
	st.Helper()
	sr := &rollout{&harness.Rollout{T: st, Name: r.Name, TaskQueue: r.TaskQueue}}
	before := sr.deployment(build)
	hash := before.Spec.Template.Annotations[workload.AnnotationConnectionHash]
	// Auto-upgrade workflows run an activity every second across the roll.
	var runs []client.WorkflowRun
	for range 3 {
		runs = append(runs, sr.startLongWith(demoworker.LongAutoUpgradeWorkflow, demoworker.LongInput{Duration: 20 * time.Second, Tick: time.Second}))
	}
	putSecret(st, name, typ, rotated)
	st.Eventually(2*time.Minute, "the workers of "+build+" rolled to the rotated credentials", func() (bool, string) {
		d := sr.deployment(build)
		return d.Spec.Template.Annotations[workload.AnnotationConnectionHash] != hash && rolledOut(d), deploymentState(d)
	})
	for range 3 {
		runs = append(runs, sr.startLongWith(demoworker.LongAutoUpgradeWorkflow, demoworker.LongInput{Duration: 5 * time.Second, Tick: time.Second}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, run := range runs {
		var res demoworker.LongResult
		if err := run.Get(ctx, &res); err != nil {
			st.Fatalf("workflow %s did not complete across the rotation: %v", run.GetID(), err)
		}
	}
	v2 := sr.SetImage("v2")
	sr.WaitCurrent(3*time.Minute, v2)
	if got := sr.hello(); !strings.Contains(got, v2) {
		st.Fatalf("after the rotation and a rollout Hello ran on %q, want build %s", got, v2)
	}
}

// rolledOut: every replica runs the Deployment's latest template.
func rolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.ReadyReplicas == want && d.Status.Replicas == want
}

// secureEnv starts a devenv of its own with flags, and the manager binary
// against it; both stop when t ends.
func secureEnv(t *testing.T, flags ...string) *harness.Env {
	t.Helper()
	own, err := harness.StartWith(flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Stop)
	log, _, _ := startManagerBinary(t, own.Info.Kubeconfig)
	t.Cleanup(func() {
		if t.Failed() {
			lines := strings.Split(log.String(), "\n")
			t.Logf("manager log (last 60 lines):\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
	return own
}

// sub is tt for a subtest: the same environment and namespace.
func sub(t *testing.T, tt *harness.T) *harness.T {
	return &harness.T{T: t, Env: tt.Env, Namespace: tt.Namespace, Suffix: tt.Suffix}
}

func newAuthority(t *testing.T) *temporalauth.Authority {
	t.Helper()
	a, err := temporalauth.New("another CA")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// defaultSecret is the Secret devenv made in namespace default.
func defaultSecret(tt *harness.T, name string) *corev1.Secret {
	tt.Helper()
	var s corev1.Secret
	if err := tt.Env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: metav1.NamespaceDefault, Name: name}, &s); err != nil {
		tt.Fatalf("Secret default/%s that devenv makes: %v", name, err)
	}
	return &s
}

// putSecret creates or replaces Secret name in the test's namespace.
func putSecret(tt *harness.T, name string, typ corev1.SecretType, data map[string][]byte) {
	tt.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: name}, Type: typ, Data: data}
	err := tt.Env.Kube.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		var cur corev1.Secret
		if err = tt.Env.Kube.Get(ctx, crclient.ObjectKeyFromObject(s), &cur); err == nil {
			cur.Data = data
			err = tt.Env.Kube.Update(ctx, &cur)
		}
	}
	if err != nil {
		tt.Fatalf("put Secret %s: %v", name, err)
	}
}
