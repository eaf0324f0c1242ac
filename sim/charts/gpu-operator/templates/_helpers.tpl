{{- define "gpu-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Node components the operator deploys, with the value that switches each on. */}}
{{- define "gpu-operator.components" -}}
- {name: nvidia-driver-daemonset, app: nvidia-driver-daemonset, enabled: {{ .Values.driver.enabled }}, image: "{{ .Values.driver.repository }}/{{ .Values.driver.image }}:{{ .Values.driver.version }}"}
- {name: nvidia-container-toolkit-daemonset, app: nvidia-container-toolkit-daemonset, enabled: {{ .Values.toolkit.enabled }}, image: "{{ .Values.toolkit.repository }}/{{ .Values.toolkit.image }}:{{ .Values.toolkit.version }}"}
- {name: nvidia-device-plugin-daemonset, app: nvidia-device-plugin-daemonset, enabled: {{ .Values.devicePlugin.enabled }}, image: "{{ .Values.devicePlugin.repository }}/{{ .Values.devicePlugin.image }}:{{ .Values.devicePlugin.version }}"}
- {name: gpu-feature-discovery, app: gpu-feature-discovery, enabled: {{ .Values.gfd.enabled }}, image: "{{ .Values.gfd.repository }}/{{ .Values.gfd.image }}:{{ .Values.gfd.version }}"}
- {name: nvidia-dcgm, app: nvidia-dcgm, enabled: {{ .Values.dcgm.enabled }}, image: "{{ .Values.dcgm.repository }}/{{ .Values.dcgm.image }}:{{ .Values.dcgm.version }}"}
- {name: nvidia-dcgm-exporter, app: nvidia-dcgm-exporter, enabled: {{ .Values.dcgmExporter.enabled }}, image: "{{ .Values.dcgmExporter.repository }}/{{ .Values.dcgmExporter.image }}:{{ .Values.dcgmExporter.version }}"}
- {name: nvidia-mig-manager, app: nvidia-mig-manager, enabled: {{ .Values.migManager.enabled }}, image: "{{ .Values.migManager.repository }}/{{ .Values.migManager.image }}:{{ .Values.migManager.version }}"}
- {name: nvidia-operator-validator, app: nvidia-operator-validator, enabled: true, image: "{{ .Values.validator.repository }}/{{ .Values.validator.image }}:{{ .Values.validator.version }}"}
{{- end }}
