{{/* The release's base name: the release name, with the chart's name unless it holds it. */}}
{{- define "rainbow.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "rainbow.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (printf "%s-manager" (include "rainbow.fullname" .)) }}
{{- end }}

{{- define "rainbow.webhookServiceName" -}}
{{- printf "%s-webhook" (include "rainbow.fullname" .) }}
{{- end }}

{{/* The Secret of the webhook's certificate, and cert-manager's Certificate. */}}
{{- define "rainbow.webhookCertName" -}}
{{- printf "%s-webhook-cert" (include "rainbow.fullname" .) }}
{{- end }}

{{- define "rainbow.webhookConfigurationName" -}}
{{- printf "%s-validating-webhook" (include "rainbow.fullname" .) }}
{{- end }}

{{- define "rainbow.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/* Labels of every object; the component label is the object's own. */}}
{{- define "rainbow.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "rainbow.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The manager's arguments (cmd/manager; docs/install.md lists them). */}}
{{- define "rainbow.args" -}}
- --identity={{ .Values.identity }}
- --max-versions={{ int .Values.maxVersions }}
{{- with .Values.temporal.allowedHosts }}
- --allowed-temporal-hosts={{ join "," . }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
{{- end }}
{{- if .Values.watchNamespaces }}
- --watch-namespaces={{ join "," .Values.watchNamespaces }}
{{- end }}
{{- if .Values.metrics.enabled }}
- --metrics-bind-address=:{{ int .Values.metrics.port }}
{{- if .Values.metrics.secure }}
- --metrics-secure
{{- end }}
{{- else }}
- --metrics-bind-address=0
{{- end }}
- --health-probe-bind-address=:{{ int .Values.healthProbe.port }}
- --webhook-port={{ int .Values.webhook.port }}
- --webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs
{{- if .Values.webhook.certManager.enabled }}
- --webhook-cert-rotation=false
{{- else }}
- --webhook-cert-rotation
- --webhook-secret={{ .Release.Namespace }}/{{ include "rainbow.webhookCertName" . }}
- --webhook-dns-name={{ include "rainbow.webhookServiceName" . }}.{{ .Release.Namespace }}.svc
- --webhook-configuration-name={{ include "rainbow.webhookConfigurationName" . }}
{{- end }}
- --owned-resource-banned-kinds={{ join "," .Values.webhook.bannedKinds }}
- --backlog-interval={{ .Values.backlog.interval }}
{{- if .Values.backlog.all }}
- --backlog-all
{{- end }}
{{- if .Values.externalMetrics.enabled }}
- --external-metrics
{{- end }}
{{- range .Values.notifications.sinks }}
- --notify=name={{ .name }},format={{ .format | default "webhook" }},{{ if .urlSecret }}url-file=/etc/rainbow/notify/{{ .name }}/{{ .urlSecret.key }}{{ else }}url={{ required "notifications.sinks[].url or urlSecret is required" .url }}{{ end }}
  {{- with .queue }},queue={{ int . }}{{ end }}
  {{- with .attempts }},attempts={{ int . }}{{ end }}
  {{- with .timeout }},timeout={{ . }}{{ end }}
{{- end }}
- --analysis-visibility-rps={{ .Values.analysis.visibilityRPS }}
{{- with .Values.analysis.prometheus }}
{{- if .url }}
- --analysis-prometheus-url={{ .url }}
{{- with .bearerTokenSecret }}
- --analysis-prometheus-bearer-token-file=/etc/rainbow/prometheus/token/{{ .key }}
{{- end }}
{{- with .caSecret }}
- --analysis-prometheus-ca-file=/etc/rainbow/prometheus/ca/{{ .key }}
{{- end }}
{{- end }}
{{- end }}
- --zap-log-level={{ .Values.logging.level }}
- --zap-encoder={{ .Values.logging.encoder }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
rainbow.generatedRules: the rules of the objects of a kind ("ClusterRole" or
"Role") in files/role.yaml, a copy of config/rbac/role.yaml that `make
generate` makes from the +kubebuilder:rbac markers, as YAML. Its Roles are
for the controller's own namespace, rainbow-system in config/.
*/}}
{{- define "rainbow.generatedRules" -}}
{{- $root := index . 0 }}
{{- $kind := index . 1 }}
{{- $rules := list }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" ($root.Files.Get "files/role.yaml") -1 }}
{{- $obj := fromYaml $doc }}
{{- if eq ($obj.kind | default "") $kind }}
{{- if and (eq $kind "Role") (ne $obj.metadata.namespace "rainbow-system") }}
{{- fail (printf "files/role.yaml: Role %s in namespace %s: the chart only knows Roles of the controller's own namespace (rainbow-system)" $obj.metadata.name $obj.metadata.namespace) }}
{{- end }}
{{- $rules = concat $rules $obj.rules }}
{{- end }}
{{- end }}
{{- /* The markers name config/'s webhook configuration; the release has its own. */}}
{{- $out := list }}
{{- range $rule := $rules }}
{{- if has "rainbow-validating-webhook" ($rule.resourceNames | default list) }}
{{- $names := append (without $rule.resourceNames "rainbow-validating-webhook") (include "rainbow.webhookConfigurationName" $root) }}
{{- $rule = merge (dict "resourceNames" $names) (omit $rule "resourceNames") }}
{{- end }}
{{- $out = append $out $rule }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
rainbow.clusterScoped lists the cluster-scoped resources a generated rule
may name: with watchNamespaces they are granted by a ClusterRole, all others
by a Role per namespace. A test checks every resource of files/role.yaml
against the API server's discovery.
*/}}
{{- define "rainbow.clusterScoped" -}}
{{- list "validatingwebhookconfigurations" "mutatingwebhookconfigurations" "validatingadmissionpolicies" "validatingadmissionpolicybindings"
  "subjectaccessreviews" "selfsubjectaccessreviews" "selfsubjectrulesreviews" "selfsubjectreviews" "tokenreviews"
  "namespaces" "nodes" "persistentvolumes" "customresourcedefinitions" "apiservices" "clusterroles" "clusterrolebindings"
  "storageclasses" "priorityclasses" "ingressclasses" "runtimeclasses" "certificatesigningrequests" | toYaml }}
{{- end }}

{{/*
rainbow.splitRules keeps, of each rule in rules, the resources that are
cluster-scoped (clusterScoped true) or namespaced (false), as YAML.
(dict "rules" $rules "clusterScoped" true)
*/}}
{{- define "rainbow.splitRules" -}}
{{- $known := include "rainbow.clusterScoped" . | fromYamlArray }}
{{- $out := list }}
{{- range $rule := .rules }}
{{- $resources := list }}
{{- range $r := $rule.resources }}
{{- if eq (has (first (splitList "/" $r)) $known) $.clusterScoped }}
{{- $resources = append $resources $r }}
{{- end }}
{{- end }}
{{- if $resources }}
{{- $out = append $out (merge (dict "resources" $resources) (omit $rule "resources")) }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
rainbow.grant grants the service account rules: with no namespaces, a
ClusterRole and a ClusterRoleBinding; otherwise a Role and a RoleBinding in
each namespace. All are named name.
(dict "root" $ "name" "..." "rules" $rules "namespaces" (list ...))
*/}}
{{- define "rainbow.grant" -}}
{{- $root := .root }}
{{- $scopes := .namespaces | default (list "") }}
{{- range $ns := $scopes }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ if $ns }}Role{{ else }}ClusterRole{{ end }}
metadata:
  name: {{ $.name }}
  {{- with $ns }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "rainbow.labels" $root | nindent 4 }}
    app.kubernetes.io/component: rbac
rules:
  {{- toYaml $.rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ if $ns }}RoleBinding{{ else }}ClusterRoleBinding{{ end }}
metadata:
  name: {{ $.name }}
  {{- with $ns }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "rainbow.labels" $root | nindent 4 }}
    app.kubernetes.io/component: rbac
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ if $ns }}Role{{ else }}ClusterRole{{ end }}
  name: {{ $.name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "rainbow.serviceAccountName" $root }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end }}

{{/* Refuses values that cannot work together. */}}
{{- define "rainbow.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "leaderElection.enabled=false with replicas=%d: every replica would reconcile; enable leaderElection, or set replicas=1 and updateStrategy.type=Recreate" (int .Values.replicas)) }}
{{- end }}
{{- $surge := include "rainbow.surge" . }}
{{- if and (not .Values.leaderElection.enabled) $surge }}
{{- fail (printf "leaderElection.enabled=false with a surge in updateStrategy (maxSurge %s): during an update the new pod would reconcile beside the old one; set updateStrategy.type=Recreate or updateStrategy.rollingUpdate.maxSurge=0, or enable leaderElection" $surge) }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1")) }}
{{- fail "metrics.serviceMonitor.enabled needs the Prometheus Operator's monitoring.coreos.com/v1 API in the cluster (with helm template, pass --api-versions monitoring.coreos.com/v1)" }}
{{- end }}
{{- if and .Values.metrics.prometheusRule.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.prometheusRule.enabled needs metrics.enabled: its alerts read the controller's metrics" }}
{{- end }}
{{- if and .Values.metrics.prometheusRule.enabled (not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1")) }}
{{- fail "metrics.prometheusRule.enabled needs the Prometheus Operator's monitoring.coreos.com/v1 API in the cluster (with helm template, pass --api-versions monitoring.coreos.com/v1)" }}
{{- end }}
{{- if and .Values.webhook.certManager.enabled (not (.Capabilities.APIVersions.Has "cert-manager.io/v1")) }}
{{- fail "webhook.certManager.enabled needs cert-manager's cert-manager.io/v1 API in the cluster (with helm template, pass --api-versions cert-manager.io/v1)" }}
{{- end }}
{{- end }}

{{/* The update strategy's surge ("" when none): a RollingUpdate's maxSurge,
Kubernetes' 25% when unset. */}}
{{- define "rainbow.surge" -}}
{{- $s := .Values.updateStrategy | default dict }}
{{- if ne ($s.type | default "RollingUpdate") "Recreate" }}
{{- $surge := toString (dig "rollingUpdate" "maxSurge" "25%" $s) }}
{{- if not (has $surge (list "0" "0%")) }}{{ $surge }}{{ end }}
{{- end }}
{{- end }}

{{/* The anti-affinity of podAntiAffinity; its labels are config/manager's
too, so both spread the same pods. */}}
{{- define "rainbow.podAntiAffinity" -}}
{{- $term := dict "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" .Chart.Name "app.kubernetes.io/component" "controller")) "topologyKey" "kubernetes.io/hostname" }}
{{- if eq .Values.podAntiAffinity "required" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    {{- toYaml (list $term) | nindent 4 }}
{{- else if eq .Values.podAntiAffinity "preferred" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    {{- toYaml (list (dict "weight" 100 "podAffinityTerm" $term)) | nindent 4 }}
{{- end }}
{{- end }}
