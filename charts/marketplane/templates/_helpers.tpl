{{/*
Names and labels shared by every template.
*/}}

{{/* The release's base name: the release name, at most 50 characters so that suffixes fit. */}}
{{- define "marketplane.fullname" -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "marketplane.operator.name" -}}{{ include "marketplane.fullname" . }}-operator{{- end -}}
{{- define "marketplane.broker.name" -}}{{ include "marketplane.fullname" . }}-broker{{- end -}}

{{/* The broker's credentials Secret: the user's or the chart's. */}}
{{- define "marketplane.broker.secretName" -}}
{{- .Values.broker.existingSecret | default (printf "%s-credentials" (include "marketplane.broker.name" .)) -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "marketplane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: marketplane
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: marketplane
{{- end -}}

{{/* Selector labels of a component: (dict "root" $ "component" "operator"). */}}
{{- define "marketplane.selectorLabels" -}}
app.kubernetes.io/name: marketplane
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of a component's objects: (dict "root" $ "component" "operator"). */}}
{{- define "marketplane.componentLabels" -}}
{{ include "marketplane.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
The image reference of a component:
(dict "root" $ "image" .Values.operator.image "name" "operator").
Registry (the image's registry, else global.imageRegistry) + repository,
then the digest when set (repository@sha256:...), else the tag (the
component's, else global.imageTag, else the chart's appVersion). There is no
default registry: rendering fails, naming the value to set, when neither is
given, so that no cluster pulls whatever its runtime's default registry
holds under the repository's name.
*/}}
{{- define "marketplane.image" -}}
{{- $registry := .image.registry | default .root.Values.global.imageRegistry | trimSuffix "/" -}}
{{- if not $registry -}}
{{- fail (printf "no image registry for %s: set global.imageRegistry (e.g. --set global.imageRegistry=registry.example.com) or %s.image.registry" .name .name) -}}
{{- end -}}
{{- if .image.digest -}}
{{ $registry }}/{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{- $tag := .image.tag | default .root.Values.global.imageTag | default .root.Chart.AppVersion -}}
{{ $registry }}/{{ .image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The pod-level securityContext of every pod of the chart. */}}
{{- define "marketplane.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The container-level securityContext of every container of the chart. */}}
{{- define "marketplane.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
  - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* imagePullSecrets of the chart's pods. */}}
{{- define "marketplane.imagePullSecrets" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
- name: {{ .name }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Where the onboarding kubeconfig is mounted. */}}
{{- define "marketplane.onboardingDir" -}}/etc/marketplane/onboarding{{- end -}}

{{/* The provider namespace and run ServiceAccount the operator gives the inter-operator (docs/operator.md). */}}
{{- define "marketplane.interoperator.account" -}}sp-{{ .Values.interoperator.name }}{{- end -}}

{{/* The marketplace's run ServiceAccount and namespace: ps-<name>. */}}
{{- define "marketplane.marketplace.account" -}}ps-{{ .Values.marketplace.name }}{{- end -}}

{{/*
The namespaces whose metrics the alerts look at, as a PromQL regular
expression: the release namespace (operator, broker) and the namespaces the
operator runs the inter-operator and the marketplace in.
*/}}
{{- define "marketplane.metricsNamespaces" -}}
{{- $ns := list .Release.Namespace -}}
{{- if .Values.interoperator.enabled -}}{{- $ns = append $ns (include "marketplane.interoperator.account" .) -}}{{- end -}}
{{- if .Values.marketplace.enabled -}}{{- $ns = append $ns (include "marketplane.marketplace.account" .) -}}{{- end -}}
{{- join "|" $ns -}}
{{- end -}}
