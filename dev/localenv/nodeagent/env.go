package nodeagent

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ParseProgramFlag parses "IMAGE=PATH" as given to --program (an executable)
// and --image (an OCI image layout). A relative path is made absolute
// because processes run in their pod directory.
func ParseProgramFlag(s string) (image, path string, err error) {
	image, path, ok := strings.Cut(s, "=")
	image, path = strings.TrimSpace(image), strings.TrimSpace(path)
	if !ok || image == "" || path == "" {
		return "", "", fmt.Errorf("invalid mapping %q: want IMAGE=PATH", s)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("invalid mapping %q: %w", s, err)
	}
	return image, abs, nil
}

// imageShortName is the last path element of an image reference without tag or
// digest: "registry:5000/a/demo-worker:v2@sha256:..." -> "demo-worker".
func imageShortName(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, '/'); i >= 0 {
		image = image[i+1:]
	}
	if i := strings.IndexByte(image, ':'); i >= 0 {
		image = image[:i]
	}
	return image
}

// resolveProgram maps an image to an executable; the error text is shown in
// the container's waiting message.
func (a *Agent) resolveProgram(image string) (string, error) {
	name := imageShortName(image)
	p, ok := a.cfg.Programs[image]
	if !ok {
		p, ok = a.cfg.Programs[name]
	}
	if ok {
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("program for image %q is not usable: %v", image, err)
		}
		return p, nil
	}
	if name != "" && name != "." && name != ".." {
		for _, dir := range a.cfg.SearchPath {
			cand := filepath.Join(dir, name)
			if checkExecutable(cand) == nil {
				return cand, nil
			}
		}
	}
	return "", fmt.Errorf("no local program for image %q: add --program %s=/path or put an executable named %s on the search path",
		image, name, name)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// configError is a missing Secret/ConfigMap (key); shown as CreateContainerConfigError.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// objectCache avoids fetching the same Secret/ConfigMap repeatedly while
// preparing one pod. It reads the agent's informer caches and asks the API
// server only about objects they do not hold (yet).
type objectCache struct {
	a          *Agent
	ctx        context.Context
	ns         string
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

func (a *Agent) newObjectCache(ctx context.Context, ns string) *objectCache {
	return &objectCache{a: a, ctx: ctx, ns: ns, secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}}
}

// secret returns nil, nil when the Secret does not exist.
func (c *objectCache) secret(name string) (*corev1.Secret, error) {
	if s, ok := c.secrets[name]; ok {
		return s, nil
	}
	if c.a.secretLister != nil {
		if s, err := c.a.secretLister.Secrets(c.ns).Get(name); err == nil {
			c.secrets[name] = s
			return s, nil
		}
	}
	s, err := c.a.client.CoreV1().Secrets(c.ns).Get(c.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.secrets[name] = s
	return s, nil
}

// configMap returns nil, nil when the ConfigMap does not exist.
func (c *objectCache) configMap(name string) (*corev1.ConfigMap, error) {
	if m, ok := c.configMaps[name]; ok {
		return m, nil
	}
	if c.a.configMapLister != nil {
		if m, err := c.a.configMapLister.ConfigMaps(c.ns).Get(name); err == nil {
			c.configMaps[name] = m
			return m, nil
		}
	}
	m, err := c.a.client.CoreV1().ConfigMaps(c.ns).Get(c.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		m, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.configMaps[name] = m
	return m, nil
}

func configMapData(m *corev1.ConfigMap) map[string][]byte {
	out := make(map[string][]byte, len(m.Data)+len(m.BinaryData))
	for k, v := range m.BinaryData {
		out[k] = v
	}
	for k, v := range m.Data {
		out[k] = []byte(v)
	}
	return out
}

// envList keeps variables in definition order; redefinition replaces in place.
type envList struct {
	names  []string
	values map[string]string
}

func (l *envList) set(name, value string) {
	if l.values == nil {
		l.values = map[string]string{}
	}
	if _, ok := l.values[name]; !ok {
		l.names = append(l.names, name)
	}
	l.values[name] = value
}

func (l *envList) lookup(name string) (string, bool) {
	v, ok := l.values[name]
	return v, ok
}

// containerEnv resolves envFrom and env like kubelet, on top of base (the
// in-cluster service variables), which $(VAR) references may use too.
// Errors of type *configError name the missing object or key.
func containerEnv(pod *corev1.Pod, podIP string, c *corev1.Container, objs *objectCache, base [][2]string) (*envList, error) {
	env := &envList{}
	for _, kv := range base {
		env.set(kv[0], kv[1])
	}
	for _, from := range c.EnvFrom {
		var data map[string][]byte
		switch {
		case from.SecretRef != nil:
			s, err := objs.secret(from.SecretRef.Name)
			if err != nil {
				return nil, err
			}
			if s == nil {
				if isOptional(from.SecretRef.Optional) {
					continue
				}
				return nil, &configError{fmt.Sprintf("secret %q not found", from.SecretRef.Name)}
			}
			data = s.Data
		case from.ConfigMapRef != nil:
			m, err := objs.configMap(from.ConfigMapRef.Name)
			if err != nil {
				return nil, err
			}
			if m == nil {
				if isOptional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, &configError{fmt.Sprintf("configmap %q not found", from.ConfigMapRef.Name)}
			}
			data = configMapData(m)
		default:
			continue
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := from.Prefix + k
			if name == "" || strings.ContainsAny(name, "=\x00") {
				continue // kubelet skips invalid names too
			}
			env.set(name, string(data[k]))
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env.set(e.Name, expand(e.Value, env.lookup))
			continue
		}
		v, ok, err := envValueFrom(pod, podIP, e.ValueFrom, objs)
		if err != nil {
			return nil, err
		}
		if ok {
			env.set(e.Name, v)
		}
	}
	return env, nil
}

func isOptional(b *bool) bool { return b != nil && *b }

func envValueFrom(pod *corev1.Pod, podIP string, src *corev1.EnvVarSource, objs *objectCache) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(pod, podIP, src.FieldRef.FieldPath)
		if err != nil {
			return "", false, &configError{err.Error()}
		}
		return v, true, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := objs.secret(ref.Name)
		if err != nil {
			return "", false, err
		}
		if s == nil {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, &configError{fmt.Sprintf("secret %q not found", ref.Name)}
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, &configError{fmt.Sprintf("couldn't find key %s in Secret %s/%s", ref.Key, s.Namespace, ref.Name)}
		}
		return string(v), true, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		m, err := objs.configMap(ref.Name)
		if err != nil {
			return "", false, err
		}
		if m == nil {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, &configError{fmt.Sprintf("configmap %q not found", ref.Name)}
		}
		v, ok := configMapData(m)[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, &configError{fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s", ref.Key, m.Namespace, ref.Name)}
		}
		return string(v), true, nil
	default:
		// resourceFieldRef (and future sources) are not supported: leave unset.
		return "", false, nil
	}
}

// fieldValue implements the downward API field paths usable from env and
// volumes; podIP is the address the agent gave the pod.
func fieldValue(pod *corev1.Pod, podIP, path string) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return localIP, nil
	}
	return "", fmt.Errorf("unsupported fieldRef path %q", path)
}

// subscript parses `prefix['key']` (or double quotes).
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"[")
	if !ok || !strings.HasSuffix(rest, "]") || len(rest) < 3 {
		return "", false
	}
	rest = rest[:len(rest)-1]
	q := rest[0]
	if (q != '\'' && q != '"') || rest[len(rest)-1] != q {
		return "", false
	}
	return rest[1 : len(rest)-1], true
}

// formatMap renders labels/annotations as kubelet does: sorted key="value" lines.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// expand implements kubelet's $(VAR) syntax: defined references are replaced,
// undefined ones are kept verbatim, and "$$" is an escaped "$".
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			ref := s[i : i+3+end]
			if v, ok := lookup(s[i+2 : i+2+end]); ok {
				b.WriteString(v)
			} else {
				b.WriteString(ref)
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// mountSource is the host path a volumeMount shows: the volume's directory,
// or its subPath; "" for a volume the agent skipped.
func mountSource(m corev1.VolumeMount, volumeDirs map[string]string, env *envList) string {
	dir := volumeDirs[m.Name]
	if dir == "" {
		return ""
	}
	sub := m.SubPath
	if m.SubPathExpr != "" {
		sub = expand(m.SubPathExpr, env.lookup)
	}
	if sub != "" {
		dir = filepath.Join(dir, sub)
	}
	return dir
}

// mountRewriter maps in-container paths under volume mounts to host paths.
type mountRewriter []struct{ from, to string }

func newMountRewriter(c *corev1.Container, volumeDirs map[string]string, env *envList) mountRewriter {
	var r mountRewriter
	for _, m := range c.VolumeMounts {
		dir := mountSource(m, volumeDirs, env)
		if dir == "" || m.MountPath == "" {
			continue
		}
		from := filepath.Clean(m.MountPath)
		r = append(r, struct{ from, to string }{from, dir})
	}
	// Deeper mounts win over their parents.
	sort.SliceStable(r, func(i, j int) bool { return len(r[i].from) > len(r[j].from) })
	return r
}

func (r mountRewriter) path(v string) string {
	for _, m := range r {
		if v == m.from || v == m.from+"/" {
			return m.to
		}
		if m.from == "/" && strings.HasPrefix(v, "/") {
			return m.to + v
		}
		if rest, ok := strings.CutPrefix(v, m.from+"/"); ok {
			return m.to + "/" + rest
		}
	}
	return v
}

// arg also rewrites the value of "--flag=/path" style arguments.
func (r mountRewriter) arg(v string) string {
	if out := r.path(v); out != v {
		return out
	}
	if strings.HasPrefix(v, "-") {
		if name, val, ok := strings.Cut(v, "="); ok {
			if out := r.path(val); out != val {
				return name + "=" + out
			}
		}
	}
	return v
}

// processEnv builds the final environment: host PATH/HOME, the container's
// variables with mount paths rewritten, then RAINBOW_IMAGE.
func processEnv(image string, env *envList, r mountRewriter) []string {
	final := &envList{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			final.set(k, v)
		}
	}
	for _, k := range env.names {
		final.set(k, r.path(env.values[k]))
	}
	final.set("RAINBOW_IMAGE", image)
	out := make([]string, 0, len(final.names))
	for _, k := range final.names {
		out = append(out, k+"="+final.values[k])
	}
	return out
}

// serviceEnv is what kubelet tells every container about the API server
// (the `kubernetes` Service). Here it names the API server's own address
// and port: the Service's ClusterIP does not route without kube-proxy.
func serviceEnv(apiServer string) [][2]string {
	u, err := url.Parse(apiServer)
	if apiServer == "" || err != nil || u.Hostname() == "" {
		return nil
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	addr := "tcp://" + net.JoinHostPort(host, port)
	prefix := "KUBERNETES_PORT_" + port + "_TCP"
	return [][2]string{
		{"KUBERNETES_SERVICE_HOST", host},
		{"KUBERNETES_SERVICE_PORT", port},
		{"KUBERNETES_SERVICE_PORT_HTTPS", port},
		{"KUBERNETES_PORT", addr},
		{prefix, addr},
		{prefix + "_PROTO", "tcp"},
		{prefix + "_PORT", port},
		{prefix + "_ADDR", host},
	}
}
