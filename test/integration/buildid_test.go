package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
)

// goldenDefaultedBuildID is the build ID of defaultedTemplate. If it
// changes, a controller upgrade starts a new version of every worker.
const goldenDefaultedBuildID = "v1-6a8a5d029af55fba"

// TestBuildIDIgnoresCRDDefaults: the API server fills in the CRD schema's
// defaults inside spec.template; the build ID of the stored TWD is the
// one of the template as written, and is pinned. The template leaves out
// every defaulted field of the CRD while holding its parent, so each
// default is applied once.
func TestBuildIDIgnoresCRDDefaults(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()
	written := defaultedTemplate()
	// No TemporalConnection of that name: the controller creates no
	// Deployment (the template is not meant to run).
	twd := validTWD(tt.Namespace, "defaults")
	twd.Spec.Template = *written.DeepCopy()
	if err := tt.Env.Kube.Create(ctx, twd); err != nil {
		t.Fatal(err)
	}

	var stored v1alpha1.TemporalWorkerDeployment
	if err := tt.Env.Kube.Get(ctx, crclient.ObjectKeyFromObject(twd), &stored); err != nil {
		t.Fatal(err)
	}
	if equality.Semantic.DeepEqual(stored.Spec.Template, *written) {
		t.Fatal("the API server applied no default to spec.template; the test proves nothing")
	}
	added := defaultsAdded(t, twd, written)
	t.Logf("the API server filled in %d defaults: %s", len(added), strings.Join(added, ", "))
	// TestSchemaDefaultsDoNotCount finds 47 in the CRD; the template must
	// give each its parent.
	if len(added) != 47 {
		t.Errorf("the API server filled in %d kinds of default, want all 47 of the CRD's spec.template: extend defaultedTemplate", len(added))
	}

	if got, want := buildid.TemplateHash(&stored.Spec.Template), buildid.TemplateHash(written); got != want {
		t.Errorf("template hash of the stored TWD %s, of the template as written %s", got, want)
	}
	if got := buildid.Generate(&stored.Spec.Template); got != goldenDefaultedBuildID {
		t.Errorf("build ID of the stored TWD %s, want the pinned %s", got, goldenDefaultedBuildID)
	}
	if got := buildid.Generate(written); got != goldenDefaultedBuildID {
		t.Errorf("build ID of the template as written %s, want the pinned %s", got, goldenDefaultedBuildID)
	}
}

// defaultsAdded reads the TWD back unstructured, as the API server stores
// it, and lists the fields of spec.template it has and written has not,
// with list positions as "[]".
func defaultsAdded(t *testing.T, twd *v1alpha1.TemporalWorkerDeployment, written *corev1.PodTemplateSpec) []string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("TemporalWorkerDeployment"))
	if err := env.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(twd), u); err != nil {
		t.Fatal(err)
	}
	stored, _, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "template")
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(written)
	if err != nil {
		t.Fatal(err)
	}
	var mine any
	if err := json.Unmarshal(data, &mine); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(path string, s, w any)
	walk = func(path string, s, w any) {
		switch sv := s.(type) {
		case map[string]any:
			wm, _ := w.(map[string]any)
			for k, v := range sv {
				wv := wm[k]
				if wv == nil { // absent, or an unset pointer written as null
					out = append(out, strings.TrimPrefix(path+"."+k, "."))
					continue
				}
				walk(path+"."+k, v, wv)
			}
		case []any:
			wl, _ := w.([]any)
			for i, v := range sv {
				if i < len(wl) {
					walk(path+"[]", v, wl[i])
				}
			}
		}
	}
	walk("", stored, mine)
	slices.Sort(out)
	return slices.Compact(out)
}

// defaultedTemplate leaves out every field the CRD schema defaults inside
// spec.template but holds each one's parent, so that the API server fills
// all of them in.
func defaultedTemplate() *corev1.PodTemplateSpec {
	grpc := func() *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}
	}
	c := corev1.Container{
		Name:  "worker",
		Image: "rainbow.local/demo-worker:v1",
		Env: []corev1.EnvVar{
			{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}},
			{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
			{Name: "C", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "files", Path: "env", Key: "k"}}},
		},
		EnvFrom:        []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}, {SecretRef: &corev1.SecretEnvSource{}}},
		Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
		LivenessProbe:  grpc(),
		ReadinessProbe: grpc(),
		StartupProbe:   grpc(),
	}
	init := c
	init.Name = "init"
	ephemeral := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)}
	ephemeral.Name = "debug"
	secret := func() *corev1.LocalObjectReference { return &corev1.LocalObjectReference{} }
	volume := func(name string, src corev1.VolumeSource) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: src}
	}
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers:          []corev1.Container{c},
		InitContainers:      []corev1.Container{init},
		EphemeralContainers: []corev1.EphemeralContainer{ephemeral},
		ImagePullSecrets:    []corev1.LocalObjectReference{{}},
		Volumes: []corev1.Volume{
			volume("azure", corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u"}}),
			volume("cephfs", corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"m"}, SecretRef: secret()}}),
			volume("cinder", corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{VolumeID: "v", SecretRef: secret()}}),
			volume("configmap", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{Optional: ptr.To(true)}}),
			volume("csi", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: secret()}}),
			volume("flex", corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "d", SecretRef: secret()}}),
			volume("iscsi", corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "p", IQN: "i", SecretRef: secret()}}),
			volume("projected", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{Optional: ptr.To(true)}}, {Secret: &corev1.SecretProjection{Optional: ptr.To(true)}},
			}}}),
			volume("rbd", corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i", SecretRef: secret()}}),
			volume("scaleio", corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g", System: "s", SecretRef: secret()}}),
			volume("storageos", corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{SecretRef: secret()}}),
		},
	}}
}
