package workload

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
)

// TestUserTemplate: the user's template comes back from a Deployment made
// with every kind of connection, and one edited by hand is refused.
func TestUserTemplate(t *testing.T) {
	in := twd()
	in.Spec.Template.Labels = map[string]string{"app": "orders"}
	in.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "x"}}
	for name, conn := range map[string]Connection{
		"plain":   {Address: "t:7233"},
		"mTLS":    {Address: "t:7233", MutualTLSSecret: "tls", HasCA: true, ServerName: "temporal.example"},
		"API key": {Address: "t:7233", APIKey: &v1alpha1.SecretKeyReference{Name: "key", Key: "apiKey"}, HasCA: true},
	} {
		d := NewDeployment(in, Identity{BuildID: buildid.Generate(&in.Spec.Template)}, conn, nil)
		got, err := UserTemplate(d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !equality.Semantic.DeepEqual(*got, in.Spec.Template) || buildid.Generate(got) != buildid.Generate(&in.Spec.Template) {
			t.Errorf("%s: got %+v, want %+v", name, got, in.Spec.Template)
		}
	}
	// As stored: the API server's defaults, one of which the user wrote.
	in.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	d := NewDeployment(in, Identity{BuildID: buildid.Generate(&in.Spec.Template)}, Connection{Address: "t:7233"}, nil)
	ps := &d.Spec.Template.Spec
	ps.RestartPolicy, ps.DNSPolicy, ps.SchedulerName, ps.TerminationGracePeriodSeconds = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler", ptr.To[int64](30)
	ps.Containers[0].TerminationMessagePath, ps.Containers[0].TerminationMessagePolicy = "/dev/termination-log", corev1.TerminationMessageReadFile
	got, err := UserTemplate(d)
	if err != nil || buildid.Generate(got) != buildid.Generate(&in.Spec.Template) || got.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Fatalf("with the server's defaults: %+v (%v)", got, err)
	}

	d.Spec.Template.Spec.Containers[0].Image = "edited:by-hand"
	if _, err := UserTemplate(d); err == nil || !strings.Contains(err.Error(), "does not hash") {
		t.Fatalf("an edited Deployment: %v", err)
	}
}
