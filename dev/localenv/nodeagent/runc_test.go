package nodeagent

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/dev/localenv/nodeagent/podexec"
)

func TestRuntimeSpecProcess(t *testing.T) {
	img := v1.Config{Entrypoint: []string{"/manager"}, Cmd: []string{"--default"}, Env: []string{"A=image", "B=image"}, User: "65532:65532", WorkingDir: "/work"}
	env := &envList{}
	env.set("B", "pod")
	env.set("X", "x")
	cases := []struct {
		name              string
		command, args     []string
		want              []string
		user              *corev1.SecurityContext
		podUser           *corev1.PodSecurityContext
		wantUID, wantGID  uint32
		wantGroups        []uint32
		wantErr           string
		readOnly, noNewPr bool
	}{
		{name: "image entrypoint and cmd", want: []string{"/manager", "--default"}, wantUID: 65532, wantGID: 65532},
		{name: "args replace cmd", args: []string{"--x=$(X)"}, want: []string{"/manager", "--x=x"}, wantUID: 65532, wantGID: 65532},
		{name: "command replaces both", command: []string{"/bin/other"}, args: []string{"$(X)"}, want: []string{"/bin/other", "x"}, wantUID: 65532, wantGID: 65532},
		{name: "container user over pod and image", want: []string{"/manager", "--default"},
			user:    &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)},
			podUser: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](2000), RunAsGroup: ptr.To[int64](3000), SupplementalGroups: []int64{5}, FSGroup: ptr.To[int64](6)},
			wantUID: 1000, wantGID: 3000, wantGroups: []uint32{5, 6}, readOnly: true, noNewPr: true},
		{name: "runAsNonRoot refuses root", want: nil, user: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(true)},
			wantErr: "container has runAsNonRoot and image will run as root"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{SecurityContext: tc.podUser}}
			c := &corev1.Container{Name: "c", Command: tc.command, Args: tc.args, SecurityContext: tc.user}
			s, err := runtimeSpec(pod, c, img, env, "p", nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Process.Args, tc.want) {
				t.Errorf("args = %q, want %q", s.Process.Args, tc.want)
			}
			if u := s.Process.User; u.UID != tc.wantUID || u.GID != tc.wantGID || !slices.Equal(u.AdditionalGids, tc.wantGroups) {
				t.Errorf("user = %+v, want %d:%d groups %v", u, tc.wantUID, tc.wantGID, tc.wantGroups)
			}
			if s.Root.Readonly != tc.readOnly || s.Process.NoNewPrivileges != tc.noNewPr {
				t.Errorf("root read-only %v, no_new_privs %v; want %v, %v", s.Root.Readonly, s.Process.NoNewPrivileges, tc.readOnly, tc.noNewPr)
			}
			// The pod's variables over the image's; PATH filled in.
			wantEnv := []string{"A=image", "B=pod", "PATH=" + defaultPath, "X=x"}
			if !slices.Equal(s.Process.Env, wantEnv) {
				t.Errorf("env = %q, want %q", s.Process.Env, wantEnv)
			}
			if s.Process.Cwd != "/work" {
				t.Errorf("cwd = %q, want the image's /work", s.Process.Cwd)
			}
		})
	}
}

func TestRuntimeSpecNamespacesAndMounts(t *testing.T) {
	pod := &corev1.Pod{}
	c := &corev1.Container{Name: "c"}
	img := v1.Config{Entrypoint: []string{"/x"}}
	mounts := []podexec.Mount{{Source: "/host/token", Target: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}, {Source: "/host/tmp", Target: "/tmp"}}
	s, err := runtimeSpec(pod, c, img, &envList{}, "mypod", mounts)
	if err != nil {
		t.Fatal(err)
	}
	var ns []specs.LinuxNamespaceType
	for _, n := range s.Linux.Namespaces {
		ns = append(ns, n.Type)
	}
	// The host's network: pods reach the API server and Temporal on 127.0.0.1.
	if slices.Contains(ns, specs.NetworkNamespace) || !slices.Contains(ns, specs.UTSNamespace) || !slices.Contains(ns, specs.PIDNamespace) || s.Hostname != "mypod" {
		t.Errorf("namespaces %v, hostname %q; want pid and uts, no network, hostname mypod", ns, s.Hostname)
	}
	got := map[string][]string{}
	for _, m := range s.Mounts {
		got[m.Destination] = m.Options
	}
	if o := got["/var/run/secrets/kubernetes.io/serviceaccount"]; !slices.Contains(o, "ro") || !slices.Contains(o, "rbind") {
		t.Errorf("token mount options %v, want a read-only bind", o)
	}
	if o := got["/tmp"]; !slices.Contains(o, "rw") {
		t.Errorf("/tmp mount options %v, want read-write", o)
	}
	if _, err := runtimeSpec(pod, c, v1.Config{}, &envList{}, "", nil); err == nil {
		t.Error("no entrypoint, cmd or command: want an error")
	}
	s, _ = runtimeSpec(pod, c, img, &envList{}, "", nil)
	for _, n := range s.Linux.Namespaces {
		if n.Type == specs.UTSNamespace {
			t.Error("hostNetwork (no hostname): want the node's UTS namespace")
		}
	}
	if _, err := runtimeSpec(pod, c, v1.Config{Entrypoint: []string{"/x"}, User: "nonroot"}, &envList{}, "", nil); err == nil || !strings.Contains(err.Error(), "runAsUser") {
		t.Errorf("a named image user: err = %v, want one that says to set runAsUser", err)
	}
}

func TestCapabilities(t *testing.T) {
	if got := capabilities(&corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}); len(got) != 0 {
		t.Errorf("drop ALL: %v, want none", got)
	}
	got := capabilities(&corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}})
	if !slices.Equal(got, []string{"CAP_NET_ADMIN"}) {
		t.Errorf("drop ALL, add NET_ADMIN: %v", got)
	}
	got = capabilities(&corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}})
	if slices.Contains(got, "CAP_NET_RAW") || !slices.Contains(got, "CAP_CHOWN") {
		t.Errorf("drop NET_RAW: %v", got)
	}
}

func TestLookupImage(t *testing.T) {
	m := map[string]string{"rainbow.local/manager": "/layout", "short": "/s", "reg:5000/a/b:v1": "/full"}
	for image, want := range map[string]string{
		"rainbow.local/manager:latest":          "/layout",
		"rainbow.local/manager@sha256:abc":      "/layout",
		"other.example/x/short:v2":              "/s",
		"reg:5000/a/b:v1":                       "/full",
		"reg:5000/a/b:v2":                       "",
		"rainbow.local/manager-other:latest":    "",
		"rainbow.local/managers/manager:latest": "",
	} {
		got, ok := lookupImage(m, image)
		if got != want || ok != (want != "") {
			t.Errorf("lookupImage(%q) = %q, %v; want %q", image, got, ok, want)
		}
	}
}

// TestLayoutUnpack writes a layout as `make image` does and unpacks it: the
// platform's image, modes and owners kept, and a symbolic link in the image
// cannot make an entry land outside the root file system.
func TestLayoutUnpack(t *testing.T) {
	data, err := tarLayer([]*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: "home/nonroot/", Typeflag: tar.TypeDir, Mode: 0o700, Uid: 65532, Gid: 65532},
		{Name: "escape", Typeflag: tar.TypeSymlink, Linkname: "/"},
		{Name: "escape/outside", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeTestLayout(filepath.Join(dir, "oci"), data, v1.Config{}, true); err != nil {
		t.Fatal(err)
	}
	got, err := layoutImage(filepath.Join(dir, "oci"), "rainbow.local/x:latest")
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := unpack(got, rootfs); err != nil {
		t.Fatal(err)
	}
	// go-containerregistry's flattening drops escape/outside; the raw
	// layer must fail on it.
	err = extractTar(bytes.NewReader(data), filepath.Join(dir, "raw"))
	if err == nil || !strings.Contains(err.Error(), "escape") {
		t.Errorf("unpacking a file behind a symlink to /: err = %v, want one naming the path", err)
	}
	if _, serr := os.Stat("/outside"); serr == nil {
		t.Fatal("the image wrote /outside on the host")
	}
	for name, want := range map[string]os.FileMode{"etc/passwd": 0o644, "tmp": 0o777 | os.ModeSticky | os.ModeDir, "home/nonroot": 0o700 | os.ModeDir} {
		fi, err := os.Stat(filepath.Join(rootfs, name))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v; want mode %v", name, fi.Mode(), err, want)
		}
	}
	if os.Geteuid() == 0 {
		fi, _ := os.Stat(filepath.Join(rootfs, "home/nonroot"))
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65532 || st.Gid != 65532 {
			t.Errorf("home/nonroot owned by %d:%d, want 65532:65532", st.Uid, st.Gid)
		}
	}
	if _, err := layoutImage(filepath.Join(dir, "missing"), "x"); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Errorf("a missing layout: err = %v, want one that says to run make image", err)
	}
}

// tarLayer is an uncompressed layer of headers; regular files hold "data".
func tarLayer(headers []*tar.Header) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range headers {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte("data")[:h.Size]); err != nil {
				return nil, err
			}
		}
	}
	err := tw.Close()
	return buf.Bytes(), err
}

// writeTestLayout writes an OCI layout holding one linux/GOARCH image of
// the layer with cfg: the image itself, or an index of it as `make image`
// writes.
func writeTestLayout(dir string, layerData []byte, cfg v1.Config, asIndex bool) error {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerData)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if !asIndex {
		return p.AppendImage(img)
	}
	return p.AppendIndex(mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}}))
}
