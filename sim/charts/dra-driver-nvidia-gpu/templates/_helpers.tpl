{{/* Names and labels, shaped like the real chart's helpers: the Deployment, the DaemonSet and the
pods' selector label key (<name>-component) follow the name (nameOverride, else the chart's name);
the service account and RBAC follow the full name (the release name when it contains the name). */}}
{{- define "dra-driver-nvidia-gpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.labels" -}}
helm.sh/chart: {{ printf "%s-%s" (default .Chart.Name .Values.nameOverride) .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "dra-driver-nvidia-gpu.templateLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.templateLabels" -}}
app.kubernetes.io/name: {{ include "dra-driver-nvidia-gpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The label key that tells the components apart, as the real chart derives it from the name. */}}
{{- define "dra-driver-nvidia-gpu.componentLabel" -}}
{{- default .context.Chart.Name .context.Values.nameOverride }}-component: {{ .componentName }}
{{- end }}

{{/* A component's selector, the component label alone as in both real charts (25.8.0 and 0.4), so that an
upgrade in place keeps the immutable selector: (dict "context" . "componentName" "controller"). */}}
{{- define "dra-driver-nvidia-gpu.selectorLabels" -}}
{{- if .context.Values.selectorLabelsOverride -}}
{{ toYaml .context.Values.selectorLabelsOverride }}
{{- else -}}
{{ include "dra-driver-nvidia-gpu.componentLabel" . }}
{{- end }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dra-driver-nvidia-gpu.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.fullimage" -}}
{{- $tag := printf "v%s" .Chart.AppVersion }}
{{- .Values.image.repository }}:{{ .Values.image.tag | default $tag }}
{{- end }}

{{/* Highest resource.k8s.io version the cluster serves, as the real chart picks it. */}}
{{- define "dra-driver-nvidia-gpu.resourceApiVersion" -}}
{{- if .Capabilities.APIVersions.Has "resource.k8s.io/v1" -}}
resource.k8s.io/v1
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta2" -}}
resource.k8s.io/v1beta2
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta1" -}}
resource.k8s.io/v1beta1
{{- end -}}
{{- end }}

{{- define "dra-driver-nvidia-gpu.featureGates" -}}
{{- range $k, $v := .Values.featureGates }}{{ $k }}={{ $v }},{{ end }}
{{- end }}
