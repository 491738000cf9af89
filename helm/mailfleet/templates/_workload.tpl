{{/*
The workload of one component (the gateway or a service), rendered by services.yaml for every
entry of the services map. Each define takes dict "root" $ "cfg" CFG "configs" ALL, where CFG is
the component's merged configuration (see mailfleet.buildConfigs) and ALL those of every component.
*/}}

{{/* Plain environment of a component: its ConfigMap's data. */}}
{{- define "mailfleet.workload.env" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- $name := $cfg.name -}}
{{- $env := dict
  "NODE_ENV" "production"
  "LOG_LEVEL" ($cfg.logLevel | default $root.Values.config.logLevel)
  "METRICS_PORT" (toString (int $cfg.ports.metrics))
  "NATS_STREAM_REPLICAS" (include "mailfleet.natsStreamReplicas" $root)
  "SHUTDOWN_DELAY_MS" (toString (int $cfg.shutdown.delayMs))
  "SHUTDOWN_TIMEOUT_MS" (toString (int $cfg.shutdown.timeoutMs))
-}}
{{- if eq $name "gateway" -}}
{{- $trust := $root.Values.config.trustProxy -}}
{{- if kindIs "string" $trust -}}
{{- $trust = $root.Values.ingress.enabled -}}
{{- end -}}
{{- $_ := set $env "PORT" (toString (int $cfg.ports.http)) -}}
{{- $_ := set $env "HOST" "0.0.0.0" -}}
{{- $_ := set $env "TRUST_PROXY" (toString $trust) -}}
{{- /* The console's CSRF rule accepts only PUBLIC_URL's origin when set: the gateway gets it only when it is where
     people reach it (configured, or the Ingress), not the in-cluster Service URL (port-forward would be refused). */ -}}
{{- if or $root.Values.config.publicUrl $root.Values.ingress.enabled -}}
{{- $_ := set $env "PUBLIC_URL" (include "mailfleet.publicUrl" $root) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $env "GRPC_PORT" (toString (int $cfg.ports.grpc)) -}}
{{- $_ := set $env "GRPC_HOST" "0.0.0.0" -}}
{{- $_ := set $env "MONGO_DB" (printf "%s%s" $root.Values.config.mongoDbPrefix $name) -}}
{{- end -}}
{{- range $upstream := $cfg.contract.upstreams -}}
{{- $u := index $.configs $upstream -}}
{{- $_ := set $env (printf "%s_GRPC_ADDR" (upper $upstream)) (printf "%s:%d" (include "mailfleet.componentName" (dict "root" $root "component" $upstream)) (int $u.ports.grpc)) -}}
{{- end -}}
{{- if eq $name "emails" -}}
{{- $_ := set $env "PUBLIC_URL" (include "mailfleet.publicUrl" $root) -}}
{{- $_ := set $env "INBOUND_SMTP_PORT" (toString (int $cfg.inboundSmtp.containerPort)) -}}
{{- with $root.Values.config.bounceDomain -}}
{{- $_ := set $env "BOUNCE_DOMAIN" . -}}
{{- end -}}
{{- end -}}
{{- if eq $name "auth" -}}
{{- /* For the operator CLI run with `kubectl exec` in this pod: it calls auth over gRPC. */ -}}
{{- $_ := set $env "AUTH_GRPC_ADDR" (printf "127.0.0.1:%d" (int $cfg.ports.grpc)) -}}
{{- end -}}
{{- if eq $name "domains" -}}
{{- with $root.Values.config.dnsServers -}}
{{- $_ := set $env "DNS_SERVERS" . -}}
{{- end -}}
{{- /* Domains publishes the bounce domain as the MX of each domain's MAIL FROM host. */ -}}
{{- with $root.Values.config.bounceDomain -}}
{{- $_ := set $env "BOUNCE_DOMAIN" . -}}
{{- end -}}
{{- end -}}
{{- if eq $name "webhooks" -}}
{{- $_ := set $env "WEBHOOK_ALLOW_PRIVATE_NETWORKS" (toString $root.Values.config.webhookAllowPrivateNetworks) -}}
{{- end -}}
{{- with $root.Values.config.extraCaCerts.configMapName -}}
{{- $_ := set $env "NODE_EXTRA_CA_CERTS" (printf "/etc/mailfleet/extra-ca/%s" $root.Values.config.extraCaCerts.key) -}}
{{- end -}}
{{- range $k, $v := $cfg.env -}}
{{- $_ := set $env $k (toString $v) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/* Environment entries from Secrets: connection URLs and the platform keys this component reads.
The gateway keeps no state: it gets NATS (key revocations) but no MongoDB. */}}
{{- define "mailfleet.workload.secretEnv" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- if ne $cfg.name "gateway" }}
- name: MONGO_URL
  valueFrom:
    {{- include "mailfleet.connectionRef" (dict "root" $root "what" "mongodb") | nindent 4 }}
{{- end }}
- name: NATS_URL
  valueFrom:
    {{- include "mailfleet.connectionRef" (dict "root" $root "what" "nats") | nindent 4 }}
{{- if and (eq $cfg.name "emails") (include "mailfleet.hasSmtp" $root) }}
- name: SMTP_URL
  valueFrom:
    {{- include "mailfleet.connectionRef" (dict "root" $root "what" "smtp") | nindent 4 }}
{{- end }}
{{- range $var, $field := $cfg.contract.secretEnv }}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ include "mailfleet.keysSecretName" $root }}
      key: {{ include "mailfleet.keysSecretKey" (dict "root" $root "field" $field) }}
{{- end }}
{{- end -}}

{{/*
Checksum of everything the chart renders that a pod reads at start: its ConfigMap, the
connections Secret and the generated keys. A change rolls exactly the pods that read it.
*/}}
{{- define "mailfleet.workload.checksum" -}}
{{- $root := .root -}}
{{- $parts := list (include "mailfleet.workload.env" .) -}}
{{- $parts = append $parts (include "mailfleet.connections.data" $root) -}}
{{- /* The keys Secret by what values say of it: generated keys never change once created. */ -}}
{{- $parts = append $parts (toJson $root.Values.secrets) -}}
{{- join "\n---\n" $parts | sha256sum -}}
{{- end -}}

{{/* A probe: a handler with the timing fields from values. Context: dict "handler" MAP "timing" MAP. */}}
{{- define "mailfleet.probe" -}}
{{- $probe := deepCopy .handler -}}
{{- range $k := list "initialDelaySeconds" "periodSeconds" "timeoutSeconds" "failureThreshold" "successThreshold" -}}
{{- if hasKey $.timing $k -}}
{{- $_ := set $probe $k (int (index $.timing $k)) -}}
{{- end -}}
{{- end -}}
{{- toYaml $probe -}}
{{- end -}}

{{/* Probes: services answer grpc.health.v1 (readiness) and /livez on the metrics port (liveness,
the process only); the gateway answers GET /v1/health on its HTTP port. */}}
{{- define "mailfleet.workload.probes" -}}
{{- $cfg := .cfg -}}
{{- $ready := dict -}}
{{- $live := dict -}}
{{- if eq $cfg.name "gateway" -}}
{{- $ready = dict "httpGet" (dict "path" "/v1/health" "port" "http") -}}
{{- $live = dict "httpGet" (dict "path" "/v1/health" "port" "http") -}}
{{- else -}}
{{- $ready = dict "grpc" (dict "port" (int $cfg.ports.grpc)) -}}
{{- $live = dict "httpGet" (dict "path" "/livez" "port" "metrics") -}}
{{- end -}}
{{- if $cfg.customReadinessProbe }}
readinessProbe:
  {{- toYaml $cfg.customReadinessProbe | nindent 2 }}
{{- else if $cfg.readinessProbe.enabled }}
readinessProbe:
  {{- include "mailfleet.probe" (dict "handler" $ready "timing" $cfg.readinessProbe) | nindent 2 }}
{{- end }}
{{- if $cfg.customLivenessProbe }}
livenessProbe:
  {{- toYaml $cfg.customLivenessProbe | nindent 2 }}
{{- else if $cfg.livenessProbe.enabled }}
livenessProbe:
  {{- include "mailfleet.probe" (dict "handler" $live "timing" $cfg.livenessProbe) | nindent 2 }}
{{- end }}
{{- if $cfg.customStartupProbe }}
startupProbe:
  {{- toYaml $cfg.customStartupProbe | nindent 2 }}
{{- else if $cfg.startupProbe.enabled }}
startupProbe:
  {{- include "mailfleet.probe" (dict "handler" $live "timing" $cfg.startupProbe) | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Affinity: explicit, else the anti-affinity preset over nodes. */}}
{{- define "mailfleet.workload.affinity" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- if $cfg.affinity }}
affinity:
  {{- toYaml $cfg.affinity | nindent 2 }}
{{- else if eq $cfg.podAntiAffinityPreset "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "mailfleet.selectorLabels" (dict "root" $root "component" $cfg.name) | nindent 14 }}
{{- else if eq $cfg.podAntiAffinityPreset "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "mailfleet.selectorLabels" (dict "root" $root "component" $cfg.name) | nindent 12 }}
{{- end }}
{{- end -}}

{{- define "mailfleet.workload.terminationGracePeriod" -}}
{{- $cfg := .cfg -}}
{{- $budgetMs := add (int $cfg.shutdown.delayMs) (int $cfg.shutdown.timeoutMs) -}}
{{- if kindIs "string" $cfg.terminationGracePeriodSeconds -}}
{{- add (div $budgetMs 1000) 5 -}}
{{- else -}}
{{- $seconds := int $cfg.terminationGracePeriodSeconds -}}
{{- if le (mul $seconds 1000) $budgetMs -}}
{{- fail (printf "services.%s: terminationGracePeriodSeconds (%d) must exceed shutdown.delayMs + shutdown.timeoutMs (%d ms), or Kubernetes kills the process mid-shutdown" $cfg.name $seconds $budgetMs) -}}
{{- end -}}
{{- $seconds -}}
{{- end -}}
{{- end -}}

{{/* ---------------------------------------------------------------- ConfigMap */}}
{{- define "mailfleet.workload.configmap" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "mailfleet.componentName" (dict "root" $root "component" $cfg.name) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailfleet.labels" (dict "root" $root "component" $cfg.name) | nindent 4 }}
  {{- include "mailfleet.annotations" (dict "root" $root) }}
data:
  {{- include "mailfleet.workload.env" . | nindent 2 }}
{{- end -}}

{{/* ---------------------------------------------------------------- ServiceAccount */}}
{{- define "mailfleet.workload.serviceAccountName" -}}
{{- if .cfg.serviceAccount.create -}}
{{- .cfg.serviceAccount.name | default (include "mailfleet.componentName" (dict "root" .root "component" .cfg.name)) -}}
{{- else -}}
{{- .cfg.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "mailfleet.workload.serviceaccount" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "mailfleet.workload.serviceAccountName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailfleet.labels" (dict "root" $root "component" $cfg.name) | nindent 4 }}
  {{- include "mailfleet.annotations" (dict "root" $root "extra" $cfg.serviceAccount.annotations) }}
automountServiceAccountToken: {{ $cfg.serviceAccount.automountServiceAccountToken }}
{{- end -}}

{{/* ---------------------------------------------------------------- Deployment */}}
{{- define "mailfleet.workload.deployment" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- $name := $cfg.name -}}
{{- $fullName := include "mailfleet.componentName" (dict "root" $root "component" $name) -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $fullName }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailfleet.labels" (dict "root" $root "component" $name) | nindent 4 }}
  {{- include "mailfleet.annotations" (dict "root" $root) }}
spec:
  {{- if not $cfg.autoscaling.enabled }}
  replicas: {{ int $cfg.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    {{- toYaml $cfg.updateStrategy | nindent 4 }}
  selector:
    matchLabels:
      {{- include "mailfleet.selectorLabels" (dict "root" $root "component" $name) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "mailfleet.labels" (dict "root" $root "component" $name) | nindent 8 }}
        {{- with $cfg.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/config: {{ include "mailfleet.workload.checksum" . }}
        {{- with $cfg.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "mailfleet.workload.serviceAccountName" . }}
      automountServiceAccountToken: {{ $cfg.serviceAccount.automountServiceAccountToken }}
      {{- include "mailfleet.imagePullSecrets" $root | nindent 6 }}
      # Service links would add a dozen *_SERVICE_HOST variables per Service in the namespace.
      enableServiceLinks: false
      securityContext:
        {{- toYaml $cfg.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ include "mailfleet.workload.terminationGracePeriod" . }}
      {{- include "mailfleet.workload.affinity" . | nindent 6 }}
      {{- with $cfg.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- range . }}
        - {{ toYaml (merge (deepCopy .) (dict "labelSelector" (dict "matchLabels" (include "mailfleet.selectorLabels" (dict "root" $root "component" $name) | fromYaml)))) | nindent 10 | trim }}
        {{- end }}
      {{- end }}
      {{- with $cfg.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $cfg.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $cfg.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      containers:
        - name: {{ $name }}
          image: {{ include "mailfleet.image" (dict "root" $root "cfg" $cfg) }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          ports:
            {{- if eq $name "gateway" }}
            - name: http
              containerPort: {{ int $cfg.ports.http }}
              protocol: TCP
            {{- else }}
            - name: grpc
              containerPort: {{ int $cfg.ports.grpc }}
              protocol: TCP
            {{- end }}
            - name: metrics
              containerPort: {{ int $cfg.ports.metrics }}
              protocol: TCP
            {{- if and (eq $name "emails") $cfg.inboundSmtp.enabled }}
            - name: smtp
              containerPort: {{ int $cfg.inboundSmtp.containerPort }}
              protocol: TCP
            {{- end }}
          envFrom:
            - configMapRef:
                name: {{ $fullName }}
            {{- with $cfg.extraEnvFrom }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            {{- include "mailfleet.workload.secretEnv" . | nindent 12 }}
            {{- with $cfg.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- include "mailfleet.workload.probes" . | nindent 10 }}
          resources:
            {{- toYaml $cfg.resources | nindent 12 }}
          securityContext:
            {{- toYaml $cfg.containerSecurityContext | nindent 12 }}
          volumeMounts:
            # The root filesystem is read-only; Node and its libraries may still want a /tmp.
            - name: tmp
              mountPath: /tmp
            {{- if $root.Values.config.extraCaCerts.configMapName }}
            - name: extra-ca
              mountPath: /etc/mailfleet/extra-ca
              readOnly: true
            {{- end }}
            {{- with $cfg.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- with $root.Values.config.extraCaCerts.configMapName }}
        - name: extra-ca
          configMap:
            name: {{ . }}
        {{- end }}
        {{- with $cfg.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
{{- end -}}

{{/* ---------------------------------------------------------------- Service */}}
{{- define "mailfleet.workload.service" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- $name := $cfg.name -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "mailfleet.componentName" (dict "root" $root "component" $name) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailfleet.labels" (dict "root" $root "component" $name) | nindent 4 }}
  {{- include "mailfleet.annotations" (dict "root" $root "extra" $cfg.service.annotations) }}
spec:
  type: {{ $cfg.service.type }}
  selector:
    {{- include "mailfleet.selectorLabels" (dict "root" $root "component" $name) | nindent 4 }}
  ports:
    {{- if eq $name "gateway" }}
    - name: http
      port: {{ int $cfg.ports.http }}
      targetPort: http
      protocol: TCP
      appProtocol: http
    {{- else }}
    - name: grpc
      port: {{ int $cfg.ports.grpc }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
    {{- end }}
    - name: metrics
      port: {{ int $cfg.ports.metrics }}
      targetPort: metrics
      protocol: TCP
      appProtocol: http
{{- end -}}

{{/* The emails service's inbound SMTP listener (bounces, feedback reports), on its own Service. */}}
{{- define "mailfleet.workload.smtpService" -}}
{{- $root := .root -}}
{{- $smtp := .cfg.inboundSmtp -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "mailfleet.componentName" (dict "root" $root "component" "emails-smtp") }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- /* Its own component label, so ServiceMonitor selectors for emails do not pick it up. */}}
    {{- include "mailfleet.labels" (dict "root" $root "component" "emails-smtp") | nindent 4 }}
  {{- include "mailfleet.annotations" (dict "root" $root "extra" $smtp.service.annotations) }}
spec:
  type: {{ $smtp.service.type }}
  {{- if and (has $smtp.service.type (list "LoadBalancer" "NodePort")) $smtp.service.externalTrafficPolicy }}
  externalTrafficPolicy: {{ $smtp.service.externalTrafficPolicy }}
  {{- end }}
  {{- if and (eq $smtp.service.type "LoadBalancer") $smtp.service.loadBalancerSourceRanges }}
  loadBalancerSourceRanges:
    {{- toYaml $smtp.service.loadBalancerSourceRanges | nindent 4 }}
  {{- end }}
  selector:
    {{- include "mailfleet.selectorLabels" (dict "root" $root "component" "emails") | nindent 4 }}
  ports:
    - name: smtp
      port: {{ int $smtp.service.port }}
      targetPort: smtp
      protocol: TCP
      appProtocol: smtp
      {{- if and (has $smtp.service.type (list "LoadBalancer" "NodePort")) $smtp.service.nodePort }}
      nodePort: {{ int $smtp.service.nodePort }}
      {{- end }}
{{- end -}}

{{/* ---------------------------------------------------------------- PodDisruptionBudget */}}
{{- define "mailfleet.workload.pdb" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "mailfleet.componentName" (dict "root" $root "component" $cfg.name) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailfleet.labels" (dict "root" $root "component" $cfg.name) | nindent 4 }}
  {{- include "mailfleet.annotations" (dict "root" $root) }}
spec:
  {{- if not (kindIs "string" $cfg.pdb.minAvailable) }}
  minAvailable: {{ $cfg.pdb.minAvailable | int }}
  {{- else if $cfg.pdb.minAvailable }}
  minAvailable: {{ $cfg.pdb.minAvailable | quote }}
  {{- else if kindIs "string" $cfg.pdb.maxUnavailable }}
  maxUnavailable: {{ $cfg.pdb.maxUnavailable | quote }}
  {{- else }}
  maxUnavailable: {{ $cfg.pdb.maxUnavailable | int }}
  {{- end }}
  # Pods that are not ready protect nothing: let a drain evict them (a crash-looping pod
  # would otherwise block node maintenance).
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      {{- include "mailfleet.selectorLabels" (dict "root" $root "component" $cfg.name) | nindent 6 }}
{{- end -}}

{{/* ---------------------------------------------------------------- HorizontalPodAutoscaler */}}
{{- define "mailfleet.workload.hpa" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- $as := $cfg.autoscaling -}}
{{- $fullName := include "mailfleet.componentName" (dict "root" $root "component" $cfg.name) -}}
{{- if and (kindIs "string" $as.targetCPUUtilizationPercentage) (kindIs "string" $as.targetMemoryUtilizationPercentage) -}}
{{- fail (printf "services.%s.autoscaling: set targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage" $cfg.name) -}}
{{- end -}}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ $fullName }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailfleet.labels" (dict "root" $root "component" $cfg.name) | nindent 4 }}
  {{- include "mailfleet.annotations" (dict "root" $root) }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ $fullName }}
  minReplicas: {{ int $as.minReplicas }}
  maxReplicas: {{ int $as.maxReplicas }}
  metrics:
    {{- if not (kindIs "string" $as.targetCPUUtilizationPercentage) }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ int $as.targetCPUUtilizationPercentage }}
    {{- end }}
    {{- if not (kindIs "string" $as.targetMemoryUtilizationPercentage) }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ int $as.targetMemoryUtilizationPercentage }}
    {{- end }}
  {{- with $as.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* ---------------------------------------------------------------- ServiceMonitor */}}
{{- define "mailfleet.workload.servicemonitor" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- $sm := $root.Values.metrics.serviceMonitor -}}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "mailfleet.componentName" (dict "root" $root "component" $cfg.name) }}
  namespace: {{ $sm.namespace | default $root.Release.Namespace }}
  labels:
    {{- include "mailfleet.labels" (dict "root" $root "component" $cfg.name) | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- include "mailfleet.annotations" (dict "root" $root) }}
spec:
  jobLabel: app.kubernetes.io/component
  namespaceSelector:
    matchNames:
      - {{ $root.Release.Namespace }}
  selector:
    matchLabels:
      {{- include "mailfleet.selectorLabels" (dict "root" $root "component" $cfg.name) | nindent 6 }}
  endpoints:
    - port: metrics
      path: /metrics
      interval: {{ $sm.interval }}
      {{- with $sm.scrapeTimeout }}
      scrapeTimeout: {{ . }}
      {{- end }}
      honorLabels: {{ $sm.honorLabels }}
      {{- with $sm.relabelings }}
      relabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $sm.metricRelabelings }}
      metricRelabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* ---------------------------------------------------------------- NetworkPolicy */}}
{{/* A peer selecting pods of this release, by component. Context: dict "root" $ "components" LIST. */}}
{{- define "mailfleet.podsPeer" -}}
- podSelector:
    matchLabels:
      {{- include "mailfleet.selectorLabels" (dict "root" .root) | nindent 6 }}
    matchExpressions:
      - key: app.kubernetes.io/component
        operator: In
        values:
          {{- toYaml .components | nindent 10 }}
{{- end -}}

{{/* Egress rules the processes of the release share: DNS, NATS and (unless .mongodb is false)
MongoDB. Context: dict "root" $ "mongodb" BOOL. */}}
{{- define "mailfleet.commonEgress" -}}
{{- $root := .root -}}
{{- $np := $root.Values.networkPolicy -}}
- ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
  {{- with $np.dnsTo }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- if not .mongodb }}
{{- else if $root.Values.mongodb.enabled }}
- ports:
    - port: 27017
      protocol: TCP
  to:
    {{- include "mailfleet.podsPeer" (dict "root" $root "components" (list "mongodb")) | nindent 4 }}
{{- else }}
- ports:
    {{- range $np.externalMongodb.ports }}
    - port: {{ int . }}
      protocol: TCP
    {{- end }}
  {{- with $np.externalMongodb.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- if $root.Values.nats.enabled }}
- ports:
    - port: 4222
      protocol: TCP
  to:
    {{- include "mailfleet.podsPeer" (dict "root" $root "components" (list "nats")) | nindent 4 }}
{{- else }}
- ports:
    {{- range $np.externalNats.ports }}
    - port: {{ int . }}
      protocol: TCP
    {{- end }}
  {{- with $np.externalNats.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{- define "mailfleet.workload.networkpolicy" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- $name := $cfg.name -}}
{{- $np := $root.Values.networkPolicy -}}
{{- /* Callers: every enabled component whose contract lists this one as an upstream. */ -}}
{{- $callers := list -}}
{{- range $other, $ocfg := $.configs -}}
{{- if and $ocfg.enabled (has $name $ocfg.contract.upstreams) -}}
{{- $callers = append $callers $other -}}
{{- end -}}
{{- end -}}
{{- if and (eq $name "auth") $root.Values.bootstrap.enabled -}}
{{- /* The bootstrap Job's CLI creates the first team through auth's gRPC API. */ -}}
{{- $callers = append $callers "bootstrap" -}}
{{- end -}}
{{- $upstreams := list -}}
{{- $upstreamPorts := list -}}
{{- range $u := $cfg.contract.upstreams -}}
{{- $ucfg := index $.configs $u -}}
{{- if $ucfg.enabled -}}
{{- $upstreams = append $upstreams $u -}}
{{- $upstreamPorts = append $upstreamPorts (int $ucfg.ports.grpc) | uniq -}}
{{- end -}}
{{- end -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "mailfleet.componentName" (dict "root" $root "component" $name) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailfleet.labels" (dict "root" $root "component" $name) | nindent 4 }}
  {{- include "mailfleet.annotations" (dict "root" $root) }}
spec:
  podSelector:
    matchLabels:
      {{- include "mailfleet.selectorLabels" (dict "root" $root "component" $name) | nindent 6 }}
  policyTypes:
    - Ingress
    - Egress
  ingress:
    {{- if eq $name "gateway" }}
    # The ingress controller reaches the public HTTP API.
    - ports:
        - port: http
          protocol: TCP
      {{- with $np.ingressControllerFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- else }}
    {{- if $callers }}
    # The services that call this one.
    - ports:
        - port: grpc
          protocol: TCP
      from:
        {{- include "mailfleet.podsPeer" (dict "root" $root "components" $callers) | nindent 8 }}
    {{- end }}
    {{- with $np.grpcClientsFrom }}
    # Internal gRPC consumers outside the release.
    - ports:
        - port: grpc
          protocol: TCP
      from:
        {{- toYaml . | nindent 8 }}
    {{- end }}
    {{- end }}
    # Prometheus scrapes /metrics.
    - ports:
        - port: metrics
          protocol: TCP
      {{- with $np.metricsFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- if and (eq $name "emails") $cfg.inboundSmtp.enabled }}
    # Bounces and feedback reports arrive from the internet.
    - ports:
        - port: smtp
          protocol: TCP
      {{- with $np.inboundSmtpFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
    {{- with $cfg.networkPolicy.extraIngress }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  egress:
    {{- include "mailfleet.commonEgress" (dict "root" $root "mongodb" (ne $name "gateway")) | nindent 4 }}
    {{- if $upstreams }}
    # The services this one calls.
    - ports:
        {{- range $upstreamPorts }}
        - port: {{ . }}
          protocol: TCP
        {{- end }}
      to:
        {{- include "mailfleet.podsPeer" (dict "root" $root "components" $upstreams) | nindent 8 }}
    {{- end }}
    {{- if eq $name "webhooks" }}
    # Webhook deliveries go to HTTPS endpoints on the internet.
    - ports:
        {{- range $np.webhooks.ports }}
        - port: {{ int . }}
          protocol: TCP
        {{- end }}
      to:
        - ipBlock:
            cidr: 0.0.0.0/0
            {{- if and $np.webhooks.exceptCidrs (not $root.Values.config.webhookAllowPrivateNetworks) }}
            except:
              {{- toYaml $np.webhooks.exceptCidrs | nindent 14 }}
            {{- end }}
    {{- end }}
    {{- if eq $name "emails" }}
    # Outbound mail goes to the SMTP relay.
    - ports:
        {{- range $np.smtpRelay.ports }}
        - port: {{ int . }}
          protocol: TCP
        {{- end }}
      {{- with $np.smtpRelay.to }}
      to:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
    {{- if eq $name "domains" }}
    # Domain verification asks DNS servers (the configured ones, or any).
    - ports:
        - port: 53
          protocol: UDP
        - port: 53
          protocol: TCP
      {{- with $np.domainsDns.to }}
      to:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
    {{- with $cfg.networkPolicy.extraEgress }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}
