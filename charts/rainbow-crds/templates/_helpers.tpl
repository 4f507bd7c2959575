{{/* Labels of every object of the chart. */}}
{{- define "rainbow-crds.labels" -}}
app.kubernetes.io/name: rainbow
app.kubernetes.io/component: crds
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
rainbow-crds.file renders every YAML document of a file under files/ (copies
of config/crd made by `make generate`), with the chart's labels added and,
for CRDs with keepOnUninstall, helm.sh/resource-policy: keep.
Call it with (list $ "files/name.yaml").
*/}}
{{- define "rainbow-crds.file" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" ($root.Files.Get $path) -1 }}
{{- $obj := fromYaml $doc }}
{{- if hasKey $obj "Error" }}
{{- fail (printf "%s: %s" $path $obj.Error) }}
{{- end }}
{{- if $obj }}
{{- $meta := $obj.metadata }}
{{- $_ := set $meta "labels" (merge (include "rainbow-crds.labels" $root | fromYaml) ($meta.labels | default dict)) }}
{{- if and (eq $obj.kind "CustomResourceDefinition") $root.Values.keepOnUninstall }}
{{- $_ := set $meta "annotations" (merge (dict "helm.sh/resource-policy" "keep") ($meta.annotations | default dict)) }}
{{- end }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}
