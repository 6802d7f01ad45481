{{/* The release's name prefix of every object. */}}
{{- define "latch.fullname" -}}
{{- if contains "latch" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-latch" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "latch.labels" -}}
app.kubernetes.io/name: latch
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector labels of one component (serve or mcp): pass (list . "serve"). */}}
{{- define "latch.selector" -}}
app.kubernetes.io/name: latch
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "latch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The headless Service that names each replica. */}}
{{- define "latch.serveService" -}}
{{ include "latch.fullname" . }}-serve
{{- end -}}

{{/* The fronts' --control-plane list: every replica's stable DNS name. */}}
{{- define "latch.controlPlanes" -}}
{{- $svc := include "latch.serveService" . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.serve.replicas) -}}
{{- $out = append $out (printf "%s-%d.%s.%s.svc:%d" $svc $i $svc $.Release.Namespace (int $.Values.serve.grpcPort)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
