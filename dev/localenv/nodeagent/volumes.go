package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type volumeFile struct {
	data []byte
	mode os.FileMode
}

const defaultFileMode = 0o644

func fileMode(item, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item) & os.ModePerm
	case def != nil:
		return os.FileMode(*def) & os.ModePerm
	default:
		return defaultFileMode
	}
}

// setupVolumes materializes the pod's volumes and keeps them current, as
// kubelet does: secret, configMap, downwardAPI and projected volumes are
// rendered on every sync (from the informer caches) and rewritten atomically
// when their content changed; service-account tokens are requested once and
// renewed at 80% of their lifetime (see tokenFor). emptyDir and hostPath are
// set up once. A volume that fails before it was ever written blocks the
// containers (retried on the next sync); a failed refresh keeps the old
// content and is logged.
func (a *Agent) setupVolumes(ctx context.Context, pod *corev1.Pod, st *podState, objs *objectCache, w *wakeup) error {
	base := filepath.Join(st.dir, "volumes")
	if err := os.MkdirAll(base, 0o700); err != nil { // tokens and secrets live here
		return err
	}
	var firstErr error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		dir := filepath.Join(base, v.Name)
		_, done := st.volumeDirs[v.Name]
		var files map[string]volumeFile
		var err error
		switch {
		case v.HostPath != nil:
			st.volumeDirs[v.Name] = filepath.Clean(v.HostPath.Path)
			continue
		case v.EmptyDir != nil:
			if done {
				continue
			}
			// Kept across agent restarts, like kubelet's emptyDir.
			if err := os.MkdirAll(dir, 0o777); err != nil {
				firstErr = keepFirst(firstErr, err)
				continue
			}
			st.volumeDirs[v.Name] = dir
			continue
		case v.Secret != nil:
			files, err = secretFiles(objs, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
		case v.ConfigMap != nil:
			files, err = configMapFiles(objs, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
		case v.DownwardAPI != nil:
			files, err = downwardFiles(pod, st.podIP, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		case v.Projected != nil:
			files, err = a.projectedFiles(ctx, pod, st, objs, v.Name, v.Projected, w)
		default:
			st.volumeDirs[v.Name] = "" // unsupported type: skipped silently
			continue
		}
		if err == nil {
			sum := contentHash(files)
			if st.volumeHash[v.Name] == sum {
				continue
			}
			if err = atomicWrite(dir, files); err == nil {
				st.volumeHash[v.Name] = sum
				if done {
					a.log.V(1).Info("volume updated", "pod", st.key, "volume", v.Name)
				}
			}
		}
		if err != nil {
			if done {
				a.log.Error(err, "refreshing volume failed, keeping its content", "pod", st.key, "volume", v.Name)
				continue
			}
			firstErr = keepFirst(firstErr, fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", v.Name, err))
			continue
		}
		st.volumeDirs[v.Name] = dir
	}
	return firstErr
}

func keepFirst(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func projectKeys(data map[string][]byte, items []corev1.KeyToPath, optional bool, def *int32, what string) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	if len(items) == 0 {
		for k, v := range data {
			files[k] = volumeFile{v, fileMode(nil, def)}
		}
		return files, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, &configError{fmt.Sprintf("couldn't find key %s in %s", it.Key, what)}
		}
		files[it.Path] = volumeFile{v, fileMode(it.Mode, def)}
	}
	return files, nil
}

func secretFiles(objs *objectCache, name string, items []corev1.KeyToPath, optional *bool, def *int32) (map[string]volumeFile, error) {
	s, err := objs.secret(name)
	if err != nil {
		return nil, err
	}
	if s == nil {
		if isOptional(optional) {
			return map[string]volumeFile{}, nil
		}
		return nil, &configError{fmt.Sprintf("secret %q not found", name)}
	}
	return projectKeys(s.Data, items, isOptional(optional), def, "Secret "+objs.ns+"/"+name)
}

func configMapFiles(objs *objectCache, name string, items []corev1.KeyToPath, optional *bool, def *int32) (map[string]volumeFile, error) {
	m, err := objs.configMap(name)
	if err != nil {
		return nil, err
	}
	if m == nil {
		if isOptional(optional) {
			return map[string]volumeFile{}, nil
		}
		return nil, &configError{fmt.Sprintf("configmap %q not found", name)}
	}
	return projectKeys(configMapData(m), items, isOptional(optional), def, "ConfigMap "+objs.ns+"/"+name)
}

func downwardFiles(pod *corev1.Pod, podIP string, items []corev1.DownwardAPIVolumeFile, def *int32) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	for _, it := range items {
		if it.FieldRef == nil {
			continue // resourceFieldRef is not supported
		}
		v, err := fieldValue(pod, podIP, it.FieldRef.FieldPath)
		if err != nil {
			return nil, err
		}
		files[it.Path] = volumeFile{[]byte(v), fileMode(it.Mode, def)}
	}
	return files, nil
}

// projectedFiles renders a projected volume, service-account tokens included.
func (a *Agent) projectedFiles(ctx context.Context, pod *corev1.Pod, st *podState, objs *objectCache, volume string,
	p *corev1.ProjectedVolumeSource, w *wakeup) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	for i, src := range p.Sources {
		var part map[string]volumeFile
		var err error
		switch {
		case src.Secret != nil:
			part, err = secretFiles(objs, src.Secret.Name, src.Secret.Items, src.Secret.Optional, p.DefaultMode)
		case src.ConfigMap != nil:
			part, err = configMapFiles(objs, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, p.DefaultMode)
		case src.DownwardAPI != nil:
			part, err = downwardFiles(pod, st.podIP, src.DownwardAPI.Items, p.DefaultMode)
		case src.ServiceAccountToken != nil:
			var token string
			token, err = a.tokenFor(ctx, pod, st, fmt.Sprintf("%s/%d", volume, i), src.ServiceAccountToken, w)
			part = map[string]volumeFile{src.ServiceAccountToken.Path: {[]byte(token), fileMode(nil, p.DefaultMode)}}
		}
		if err != nil {
			return nil, err
		}
		for k, v := range part {
			files[k] = v
		}
	}
	return files, nil
}

// token is a service-account token the agent holds for a pod's volume.
type token struct {
	value     string
	refreshAt time.Time
}

// maxTokenAge is when kubelet renews a token at the latest, whatever its lifetime.
const maxTokenAge = 24 * time.Hour

// tokenFor returns the token of a serviceAccountToken projection, requested
// with the TokenRequest API for the pod's service account and bound to the
// pod, like kubelet: the API server's default audiences unless the source
// names one, the requested lifetime (3607s for kube-api-access volumes). A
// token is renewed once 80% of its lifetime has passed, or after 24 hours.
func (a *Agent) tokenFor(ctx context.Context, pod *corev1.Pod, st *podState, key string,
	src *corev1.ServiceAccountTokenProjection, w *wakeup) (string, error) {
	if t, ok := st.tokens[key]; ok && w.now.Before(t.refreshAt) {
		w.atTime(t.refreshAt)
		return t.value, nil
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	issued := time.Now()
	tr, err := a.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		if t, ok := st.tokens[key]; ok {
			// Keep serving the old token and try again soon, as kubelet does.
			w.after(retryDelay)
			a.log.Error(err, "renewing a service account token failed", "pod", st.key, "serviceAccount", sa)
			return t.value, nil
		}
		return "", fmt.Errorf("requesting a token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	refresh := tokenRefreshAt(issued, tr.Status.ExpirationTimestamp.Time, tr.Spec.ExpirationSeconds)
	st.tokens[key] = token{value: tr.Status.Token, refreshAt: refresh}
	w.atTime(refresh)
	return tr.Status.Token, nil
}

// tokenRefreshAt is when a token issued at issued, expiring at exp, is
// renewed: after 80% of its lifetime (the requested one, if the API server
// extended it), or after 24 hours.
func tokenRefreshAt(issued, exp time.Time, requested *int64) time.Time {
	life := exp.Sub(issued)
	if requested != nil {
		life = min(life, time.Duration(*requested)*time.Second)
	}
	return issued.Add(min(life*8/10, maxTokenAge))
}

// contentHash identifies a volume's content, to skip rewriting it unchanged.
func contentHash(files map[string]volumeFile) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", n, files[n].mode, len(files[n].data))
		h.Write(files[n].data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// atomicWrite makes dir hold exactly files the way kubelet's AtomicWriter
// does: the files live in a fresh directory ..<timestamp>, the symlink
// ..data points at it and each top-level name is a symlink into ..data.
// Swapping ..data is atomic for readers, and dir itself stays the same
// directory, so a bind mount of it sees every update.
func atomicWrite(dir string, files map[string]volumeFile) error {
	top := map[string]bool{}
	for rel := range files {
		clean := filepath.Clean(rel)
		if filepath.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || strings.HasPrefix(clean, "..") {
			return fmt.Errorf("invalid path %q", rel)
		}
		top[strings.SplitN(clean, "/", 2)[0]] = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return err
	}
	for rel, f := range files {
		p := filepath.Join(tsDir, filepath.Clean(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil { // WriteFile is subject to umask
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := replaceSymlink(filepath.Base(tsDir), filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range top {
		target := filepath.Join("..data", name)
		if cur, err := os.Readlink(filepath.Join(dir, name)); err == nil && cur == target {
			continue
		}
		if err := replaceSymlink(target, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, "..") && !top[n] {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	if old != "" && old != filepath.Base(tsDir) {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

// replaceSymlink points link at target atomically (rename over it); it
// refuses to replace a directory, which an older agent version left there.
func replaceSymlink(target, link string) error {
	if fi, err := os.Lstat(link); err == nil && fi.IsDir() {
		if err := os.RemoveAll(link); err != nil {
			return err
		}
	}
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}
