{{/* The chart's name, or nameOverride: the app.kubernetes.io/name label. */}}
{{- define "diskcanary.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release name, prefixed by the chart name unless it contains it. */}}
{{- define "diskcanary.fullname" -}}
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

{{- define "diskcanary.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "diskcanary.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "diskcanary.selectorLabels" -}}
app.kubernetes.io/name: {{ include "diskcanary.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "diskcanary.labels" -}}
helm.sh/chart: {{ include "diskcanary.chart" . }}
{{ include "diskcanary.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: exporter
app.kubernetes.io/part-of: diskcanary
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "diskcanary.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "diskcanary.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "diskcanary.image" -}}
{{- $repo := .Values.image.repository }}
{{- if .Values.image.registry }}
{{- $repo = printf "%s/%s" .Values.image.registry .Values.image.repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The probe directories, checked: absolute, no repeats. */}}
{{- define "diskcanary.probeDirs" -}}
{{- if not .Values.probeDirs }}
{{- fail "probeDirs: give at least one host directory to probe" }}
{{- end }}
{{- range .Values.probeDirs }}
{{- if not (hasPrefix "/" .) }}
{{- fail (printf "probeDirs: %q is not an absolute path" .) }}
{{- end }}
{{- end }}
{{- if ne (len .Values.probeDirs) (len (uniq .Values.probeDirs)) }}
{{- fail "probeDirs: a directory is listed twice" }}
{{- end }}
{{- toJson .Values.probeDirs }}
{{- end }}

{{/* The volume of probe directory number i: "probe" for the first, as in deploy/kubernetes. */}}
{{- define "diskcanary.probeVolume" -}}
{{- if eq (int .) 0 }}probe{{ else }}probe-{{ . }}{{ end }}
{{- end }}

{{/* A latency in seconds as the generator's alert text writes it: 10 ms, 1.5 s. */}}
{{- define "diskcanary.latency" -}}
{{- if lt (float64 .) 1.0 }}{{ mulf . 1000 }} ms{{ else }}{{ float64 . }} s{{ end }}
{{- end }}

{{/* (list TEXT FILL): TEXT with each placeholder of the dict FILL replaced. */}}
{{- define "diskcanary.fill" -}}
{{- $s := index . 0 }}
{{- range $placeholder, $text := index . 1 }}{{ $s = replace $placeholder $text $s }}{{ end }}
{{- $s }}
{{- end }}
