{{- define "gpu-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* A component's image fields in the ClusterPolicy, as the real chart writes them. */}}
{{/* The chart-managed GPUCluster's name (the real pre-delete hook deletes it by this name). */}}
{{- define "gpu-operator.gpucluster-name" -}}
gpu-cluster
{{- end }}

{{- define "gpu-operator.image" -}}
repository: {{ .repository }}
image: {{ .image }}
version: {{ .version | quote }}
{{- end }}
