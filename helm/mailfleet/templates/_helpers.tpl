{{/*
Names, labels, merged per-service configuration and the process contract shared by every template.
*/}}

{{/* The chart name. */}}
{{- define "mailfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* `<release>-<chart>` (or the release name when it already holds the chart name), capped at
50 characters so that `-<component>` still fits a 63-character DNS label. */}}
{{- define "mailfleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of a component's resources. Context: dict "root" $ "component" NAME. */}}
{{- define "mailfleet.componentName" -}}
{{- printf "%s-%s" (include "mailfleet.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mailfleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels. Context: dict "root" $ "component" NAME (component optional). */}}
{{- define "mailfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mailfleet.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* Standard labels. Context: dict "root" $ "component" NAME (component optional). */}}
{{- define "mailfleet.labels" -}}
helm.sh/chart: {{ include "mailfleet.chart" .root }}
{{ include "mailfleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: mailfleet
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The metadata.annotations block (indented for metadata) of commonAnnotations merged with extra
ones, or nothing when both are empty. Context: dict "root" $ "extra" MAP. */}}
{{- define "mailfleet.annotations" -}}
{{- $all := merge (deepCopy (.extra | default dict)) (.root.Values.commonAnnotations | default dict) -}}
{{- if $all }}
  annotations:
    {{- toYaml $all | nindent 4 }}
{{- end }}
{{- end -}}

{{/* The gateway and the eight services, in a fixed order. */}}
{{- define "mailfleet.componentNames" -}}
gateway auth domains contacts emails campaigns suppressions webhooks analytics
{{- end -}}

{{/*
What each process is, from the code, not from values: its entry in the image, the services it
calls (gRPC upstreams: the *_GRPC_ADDR variables and the NetworkPolicy call graph) and the
environment variables it reads from the keys Secret (variable: key in values.secrets).
*/}}
{{- define "mailfleet.contract" -}}
gateway:
  entry: gateway/dist/server.js
  upstreams: [auth, domains, contacts, emails, campaigns, suppressions, webhooks, analytics]
  secretEnv:
    TRACKING_SIGNING_KEY: trackingSigningKey
auth:
  entry: services/auth/dist/main.js
  upstreams: []
  secretEnv:
    API_KEY_HASH_SECRET: apiKeyHashSecret
domains:
  entry: services/domains/dist/main.js
  upstreams: []
  secretEnv:
    DKIM_MASTER_KEY: dkimMasterKey
contacts:
  entry: services/contacts/dist/main.js
  upstreams: [campaigns]
  secretEnv: {}
emails:
  entry: services/emails/dist/main.js
  upstreams: [auth, domains, suppressions, contacts]
  secretEnv:
    TRACKING_SIGNING_KEY: trackingSigningKey
campaigns:
  entry: services/campaigns/dist/main.js
  upstreams: [contacts, emails, domains, suppressions]
  secretEnv: {}
suppressions:
  entry: services/suppressions/dist/main.js
  upstreams: []
  secretEnv: {}
webhooks:
  entry: services/webhooks/dist/main.js
  upstreams: []
  secretEnv: {}
analytics:
  entry: services/analytics/dist/main.js
  upstreams: []
  secretEnv: {}
{{- end -}}

{{/*
Deep-merges .src into .dst in place: maps merge key by key; scalars and lists (false and 0
included, which sprig's merge functions would drop) replace. Context: dict "dst" MAP "src" MAP.
*/}}
{{- define "mailfleet.mergeInto" -}}
{{- $dst := .dst -}}
{{- range $key, $value := .src -}}
{{- $current := get $dst $key -}}
{{- if and (kindIs "map" $value) (kindIs "map" $current) -}}
{{- include "mailfleet.mergeInto" (dict "dst" $current "src" $value) -}}
{{- else if kindIs "map" $value -}}
{{- $_ := set $dst $key (deepCopy $value) -}}
{{- else -}}
{{- $_ := set $dst $key $value -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Fills .out with one merged configuration per component (serviceDefaults overridden by
services.<name>), each with its contract under "contract" and "name". Context: dict "root" $ "out" MAP.
*/}}
{{- define "mailfleet.buildConfigs" -}}
{{- $root := .root -}}
{{- $contract := include "mailfleet.contract" $root | fromYaml -}}
{{- range $name := splitList " " (include "mailfleet.componentNames" $root) -}}
{{- $cfg := deepCopy $root.Values.serviceDefaults -}}
{{- include "mailfleet.mergeInto" (dict "dst" $cfg "src" (index $root.Values.services $name | default dict)) -}}
{{- if not (hasKey $cfg "enabled") -}}
{{- $_ := set $cfg "enabled" true -}}
{{- end -}}
{{- $_ := set $cfg "name" $name -}}
{{- $_ := set $cfg "contract" (index $contract $name) -}}
{{- $_ := set $.out $name $cfg -}}
{{- end -}}
{{- end -}}

{{/* Image reference of a component. Context: dict "root" $ "cfg" CFG. */}}
{{- define "mailfleet.image" -}}
{{- $img := .cfg.image | default dict -}}
{{- if $img.reference -}}
{{- $img.reference -}}
{{- else -}}
{{- $registry := $img.registry | default .root.Values.image.registry -}}
{{- $repository := $img.repository | default (printf "%s%s" .root.Values.image.repositoryPrefix .cfg.name) -}}
{{- $tag := $img.tag | default .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- $ref := $repository -}}
{{- if $registry -}}
{{- $ref = printf "%s/%s" (trimSuffix "/" $registry) $repository -}}
{{- end -}}
{{- if $img.digest -}}
{{- printf "%s:%s@%s" $ref $tag $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $ref $tag -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Image of a third-party component (mongodb, nats). Context: the image map. */}}
{{- define "mailfleet.thirdPartyImage" -}}
{{- if .registry -}}
{{- printf "%s/%s:%s" .registry .repository .tag -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}

{{/* imagePullSecrets block, or nothing. */}}
{{- define "mailfleet.imagePullSecrets" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Name of the Secret with the three platform keys. */}}
{{- define "mailfleet.keysSecretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else -}}
{{- include "mailfleet.componentName" (dict "root" . "component" "keys") -}}
{{- end -}}
{{- end -}}

{{/* Key in the keys Secret of a values.secrets field (dkimMasterKey, ...). Context: dict "root" $ "field" F. */}}
{{- define "mailfleet.keysSecretKey" -}}
{{- if .root.Values.secrets.existingSecret -}}
{{- index .root.Values.secrets.existingSecretKeys .field -}}
{{- else -}}
{{- .field | kebabcase -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret with the connection URLs the chart manages. */}}
{{- define "mailfleet.connectionsSecretName" -}}
{{- include "mailfleet.componentName" (dict "root" . "component" "connections") -}}
{{- end -}}

{{/* In-chart server addresses. */}}
{{- define "mailfleet.mongodbUrl" -}}
{{- printf "mongodb://%s:27017" (include "mailfleet.componentName" (dict "root" . "component" "mongodb")) -}}
{{- end -}}

{{- define "mailfleet.natsUrl" -}}
{{- printf "nats://%s:4222" (include "mailfleet.componentName" (dict "root" . "component" "nats")) -}}
{{- end -}}

{{/* NATS_STREAM_REPLICAS: follows the in-chart cluster size, else externalNats.streamReplicas. */}}
{{- define "mailfleet.natsStreamReplicas" -}}
{{- if .Values.nats.enabled -}}
{{- min 3 (int .Values.nats.replicaCount) -}}
{{- else -}}
{{- int .Values.externalNats.streamReplicas -}}
{{- end -}}
{{- end -}}

{{/*
valueFrom of a connection URL (MONGO_URL, NATS_URL, SMTP_URL): an existing Secret when one is
named, else the chart's connections Secret. Context: dict "root" $ "what" (mongodb|nats|smtp).
*/}}
{{- define "mailfleet.connectionRef" -}}
{{- $root := .root -}}
{{- $name := include "mailfleet.connectionsSecretName" $root -}}
{{- $key := .what | printf "%s-url" -}}
{{- if and (eq .what "mongodb") (not $root.Values.mongodb.enabled) $root.Values.externalMongodb.existingSecret -}}
{{- $name = $root.Values.externalMongodb.existingSecret -}}
{{- $key = $root.Values.externalMongodb.existingSecretKey -}}
{{- else if and (eq .what "nats") (not $root.Values.nats.enabled) $root.Values.externalNats.existingSecret -}}
{{- $name = $root.Values.externalNats.existingSecret -}}
{{- $key = $root.Values.externalNats.existingSecretKey -}}
{{- else if and (eq .what "smtp") $root.Values.smtp.existingSecret -}}
{{- $name = $root.Values.smtp.existingSecret -}}
{{- $key = $root.Values.smtp.existingSecretKey -}}
{{- end -}}
secretKeyRef:
  name: {{ $name }}
  key: {{ $key }}
{{- end -}}

{{/* True (non-empty) when the emails service gets an SMTP_URL. */}}
{{- define "mailfleet.hasSmtp" -}}
{{- if or .Values.smtp.url .Values.smtp.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* The gateway's public base URL (PUBLIC_URL). */}}
{{- define "mailfleet.publicUrl" -}}
{{- if .Values.config.publicUrl -}}
{{- .Values.config.publicUrl | trimSuffix "/" -}}
{{- else if .Values.ingress.enabled -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls) .Values.ingress.hostname -}}
{{- else -}}
{{- $gw := .Values.services.gateway.ports.http | default 3000 -}}
{{- printf "http://%s.%s.svc:%d" (include "mailfleet.componentName" (dict "root" . "component" "gateway")) .Release.Namespace (int $gw) -}}
{{- end -}}
{{- end -}}

{{/* The port a component is called on: http for the gateway, grpc for a service. Context: CFG. */}}
{{- define "mailfleet.servingPort" -}}
{{- if eq .name "gateway" -}}{{ int .ports.http }}{{- else -}}{{ int .ports.grpc }}{{- end -}}
{{- end -}}

{{/* stringData of the connections Secret: the URLs no existing Secret provides. */}}
{{- define "mailfleet.connections.data" -}}
{{- $data := dict -}}
{{- if .Values.mongodb.enabled -}}
{{- $_ := set $data "mongodb-url" (include "mailfleet.mongodbUrl" .) -}}
{{- else if not .Values.externalMongodb.existingSecret -}}
{{- if not .Values.externalMongodb.url -}}
{{- fail "MongoDB: set externalMongodb.url (or externalMongodb.existingSecret), or mongodb.enabled=true for a trial" -}}
{{- end -}}
{{- $_ := set $data "mongodb-url" .Values.externalMongodb.url -}}
{{- end -}}
{{- if .Values.nats.enabled -}}
{{- $_ := set $data "nats-url" (include "mailfleet.natsUrl" .) -}}
{{- else if not .Values.externalNats.existingSecret -}}
{{- if not .Values.externalNats.url -}}
{{- fail "NATS: set externalNats.url (or externalNats.existingSecret), or nats.enabled=true for a trial" -}}
{{- end -}}
{{- $_ := set $data "nats-url" .Values.externalNats.url -}}
{{- end -}}
{{- if and .Values.smtp.url (not .Values.smtp.existingSecret) -}}
{{- $_ := set $data "smtp-url" .Values.smtp.url -}}
{{- end -}}
{{- if $data -}}
{{- toYaml $data -}}
{{- end -}}
{{- end -}}

{{/* nats.conf of the in-chart NATS. Context: dict "root" $ "name" N "headless" H "replicas" R. */}}
{{- define "mailfleet.nats.config" -}}
{{- $js := .root.Values.nats.jetstream -}}
server_name: $POD_NAME
listen: 0.0.0.0:4222
http: 0.0.0.0:8222
pid_file: /var/run/nats/nats.pid
lame_duck_duration: 30s
lame_duck_grace_period: 10s
jetstream {
  store_dir: /data
  max_memory_store: {{ $js.maxMemoryStore }}
  max_file_store: {{ $js.maxFileStore }}
}
{{- if gt .replicas 1 }}
cluster {
  name: {{ .name }}
  listen: 0.0.0.0:6222
  routes: [
    {{- range $i := until .replicas }}
    nats://{{ $.name }}-{{ $i }}.{{ $.headless }}:6222
    {{- end }}
  ]
}
{{- end }}
{{- end -}}
