package nodeagent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

// setupVolumes materializes the pod's volumes that are not done yet. Each
// volume is done at most once per pod; a failing one is retried on the next
// sync. Skipped volumes are recorded with an empty dir.
func (a *Agent) setupVolumes(pod *corev1.Pod, st *podState, objs *objectCache) error {
	base := filepath.Join(st.dir, "volumes")
	var firstErr error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if _, done := st.volumeDirs[v.Name]; done {
			continue
		}
		dir := filepath.Join(base, v.Name)
		var files map[string]volumeFile
		var err error
		switch {
		case v.HostPath != nil:
			st.volumeDirs[v.Name] = filepath.Clean(v.HostPath.Path)
			continue
		case v.EmptyDir != nil:
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
			files, err = downwardFiles(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		case v.Projected != nil:
			var skip bool
			files, skip, err = projectedFiles(pod, objs, v.Projected)
			if skip {
				st.volumeDirs[v.Name] = ""
				continue
			}
		default:
			st.volumeDirs[v.Name] = "" // unsupported type: skipped silently
			continue
		}
		if err == nil {
			err = writeVolume(dir, files)
		}
		if err != nil {
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

func downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def *int32) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	for _, it := range items {
		if it.FieldRef == nil {
			continue // resourceFieldRef is not supported
		}
		v, err := fieldValue(pod, it.FieldRef.FieldPath)
		if err != nil {
			return nil, err
		}
		files[it.Path] = volumeFile{[]byte(v), fileMode(it.Mode, def)}
	}
	return files, nil
}

// projectedFiles reports skip for service-account token volumes: there is no
// token issuer for local processes.
func projectedFiles(pod *corev1.Pod, objs *objectCache, p *corev1.ProjectedVolumeSource) (map[string]volumeFile, bool, error) {
	for _, src := range p.Sources {
		if src.ServiceAccountToken != nil {
			return nil, true, nil
		}
	}
	files := map[string]volumeFile{}
	for _, src := range p.Sources {
		var part map[string]volumeFile
		var err error
		switch {
		case src.Secret != nil:
			part, err = secretFiles(objs, src.Secret.Name, src.Secret.Items, src.Secret.Optional, p.DefaultMode)
		case src.ConfigMap != nil:
			part, err = configMapFiles(objs, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, p.DefaultMode)
		case src.DownwardAPI != nil:
			part, err = downwardFiles(pod, src.DownwardAPI.Items, p.DefaultMode)
		}
		if err != nil {
			return nil, false, err
		}
		for k, v := range part {
			files[k] = v
		}
	}
	return files, false, nil
}

// writeVolume builds the volume next to dir and swaps it in, so a retry never
// sees a half-written volume.
func writeVolume(dir string, files map[string]volumeFile) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for rel, f := range files {
		clean := filepath.Clean(rel)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("invalid path %q", rel)
		}
		p := filepath.Join(tmp, clean)
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
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}
