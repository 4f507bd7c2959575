package admission

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

// secretReader lets users get the Secrets it lists, as "user/secret", and
// records what was asked.
type secretReader struct {
	may   map[string]bool
	asked []authorizationv1.SubjectAccessReviewSpec
	err   error
}

func (r *secretReader) Review(_ context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	r.asked = append(r.asked, spec)
	a := spec.ResourceAttributes
	ok := a.Verb == "get" && a.Group == "" && a.Resource == "secrets" && a.Namespace == "ns" && r.may[spec.User+"/"+a.Name]
	return authorizationv1.SubjectAccessReviewStatus{Allowed: ok}, r.err
}

func tconn(hostPort, tlsSecret, keySecret string) *v1alpha1.TemporalConnection {
	c := &v1alpha1.TemporalConnection{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TemporalConnection"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: hostPort},
	}
	if tlsSecret != "" {
		c.Spec.MutualTLSSecretRef = &v1alpha1.SecretReference{Name: tlsSecret}
	}
	if keySecret != "" {
		c.Spec.APIKeySecretRef = &v1alpha1.SecretKeyReference{Name: keySecret, Key: "apiKey"}
	}
	return c
}

func connRequest(t *testing.T, op admissionv1.Operation, obj, old *v1alpha1.TemporalConnection) cradmission.Request {
	raw := func(o *v1alpha1.TemporalConnection) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Name: "c", Namespace: "ns", Object: raw(obj), OldObject: raw(old),
		Kind:     metav1.GroupVersionKind{Group: "temporal.io", Version: "v1alpha1", Kind: "TemporalConnection"},
		Resource: metav1.GroupVersionResource{Group: "temporal.io", Version: "v1alpha1", Resource: "temporalconnections"},
		UserInfo: authenticationv1.UserInfo{Username: "bob", UID: "u-1", Groups: []string{"dev"},
			Extra: map[string]authenticationv1.ExtraValue{"scopes": {"s"}}},
	}}
}

// TestConnectionHandle: whoever creates a connection, or points it at
// another address or other Secrets, must be allowed to get each Secret it
// names, and the address must be allowed; other updates are not checked.
func TestConnectionHandle(t *testing.T) {
	allowed, err := temporal.ParseAllowedHosts("temporal.example.com:7233,*.tmprl.cloud:7233")
	if err != nil {
		t.Fatal(err)
	}
	const good, other = "temporal.example.com:7233", "ns.acct.tmprl.cloud:7233"
	relabelled := tconn(good, "", "theirs")
	relabelled.Labels = map[string]string{"team": "a"}
	otherKey := tconn(good, "", "theirs")
	otherKey.Spec.APIKeySecretRef.Key = "other"
	cases := map[string]struct {
		op       admissionv1.Operation
		obj, old *v1alpha1.TemporalConnection
		may      []string
		// want is "" for admitted, else the HTTP code and message parts.
		code  int32
		want  []string
		asked []string
	}{
		"create, no Secrets":       {op: admissionv1.Create, obj: tconn(good, "", "")},
		"create, readable Secrets": {op: admissionv1.Create, obj: tconn(good, "tls", ""), may: []string{"bob/tls"}, asked: []string{"tls"}},
		"create naming a Secret bob may not read": {
			op: admissionv1.Create, obj: tconn(good, "", "theirs"), code: http.StatusForbidden, asked: []string{"theirs"},
			want: []string{`spec.apiKeySecretRef.name: user "bob" may not get secrets "theirs" in namespace "ns"`, "name a Secret you may read"},
		},
		"create, mTLS Secret not readable": {
			op: admissionv1.Create, obj: tconn(good, "certs", ""), code: http.StatusForbidden, asked: []string{"certs"},
			want: []string{`spec.mutualTLSSecretRef.name: user "bob" may not get secrets "certs"`},
		},
		"create to an address not allowed": {
			op: admissionv1.Create, obj: tconn("attacker.test:7233", "", ""), code: http.StatusUnprocessableEntity,
			want: []string{"spec.hostPort: Forbidden", "attacker.test:7233 is not one of", "--allowed-temporal-hosts=temporal.example.com:7233,*.tmprl.cloud:7233", "use an allowed address"},
		},
		"update moving readable-by-others Secrets to another address": {
			op: admissionv1.Update, obj: tconn(other, "", "theirs"), old: tconn(good, "", "theirs"), code: http.StatusForbidden, asked: []string{"theirs"},
			want: []string{`user "bob" may not get secrets "theirs"`},
		},
		"update moving them to an address not allowed": {
			op: admissionv1.Update, obj: tconn("10.0.0.1:22", "", "theirs"), old: tconn(good, "", "theirs"), code: http.StatusUnprocessableEntity,
			want: []string{"10.0.0.1:22 is not one of"},
		},
		"update to another Secret": {
			op: admissionv1.Update, obj: tconn(good, "", "theirs"), old: tconn(good, "", "mine"), may: []string{"bob/mine"},
			code: http.StatusForbidden, asked: []string{"theirs"}, want: []string{`may not get secrets "theirs"`},
		},
		"update to another key of the Secret": {
			op: admissionv1.Update, obj: otherKey, old: tconn(good, "", "theirs"),
			code: http.StatusForbidden, asked: []string{"theirs"}, want: []string{`may not get secrets "theirs"`},
		},
		"update to a readable Secret": {
			op: admissionv1.Update, obj: tconn(good, "", "mine"), old: tconn(good, "", "theirs"), may: []string{"bob/mine"}, asked: []string{"mine"},
		},
		"update of labels only": {op: admissionv1.Update, obj: relabelled, old: tconn(good, "", "theirs")},
		"update of a connection stored before the list, address unchanged": {
			op: admissionv1.Update, obj: tconn("attacker.test:7233", "", ""), old: tconn("attacker.test:7233", "", ""),
		},
		"delete is not this webhook's":  {op: admissionv1.Delete, old: tconn(good, "", ""), code: http.StatusForbidden, want: []string{"checks only the creation and update"}},
		"update without the old object": {op: admissionv1.Update, obj: tconn(good, "", ""), code: http.StatusForbidden, want: []string{"checks only the creation and update"}},
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		r := &secretReader{may: map[string]bool{}}
		for _, m := range tc.may {
			r.may[m] = true
		}
		resp := NewConnectionValidator(scheme, r, allowed.Check).Handle(context.Background(), connRequest(t, tc.op, tc.obj, tc.old))
		if tc.code == 0 {
			if !resp.Allowed {
				t.Errorf("%s: refused: %+v", name, resp.Result)
			}
		} else {
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			if resp.Allowed || resp.Result == nil || resp.Result.Code != tc.code {
				t.Errorf("%s: allowed=%t code=%v (%s), want refused with %d", name, resp.Allowed, resp.Result, msg, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: message %q lacks %q", name, msg, w)
				}
			}
		}
		var asked []string
		for _, a := range r.asked {
			asked = append(asked, a.ResourceAttributes.Name)
			if a.User != "bob" || a.UID != "u-1" || len(a.Groups) != 1 || len(a.Extra["scopes"]) != 1 {
				t.Errorf("%s: reviewed %+v, want bob with his UID, groups and extra", name, a)
			}
		}
		if strings.Join(asked, ",") != strings.Join(tc.asked, ",") {
			t.Errorf("%s: reviewed Secrets %v, want %v", name, asked, tc.asked)
		}
	}
}

// TestConnectionHandleReviewFails: an unanswered review refuses.
func TestConnectionHandleReviewFails(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := &secretReader{err: errors.New("API server away")}
	resp := NewConnectionValidator(scheme, r, nil).Handle(context.Background(),
		connRequest(t, admissionv1.Create, tconn("t:7233", "tls", ""), nil))
	if resp.Allowed || resp.Result.Code != http.StatusInternalServerError {
		t.Errorf("got %+v, want a 500 refusal", resp.Result)
	}
}
