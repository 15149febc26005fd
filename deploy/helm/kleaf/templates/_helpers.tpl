{{/* Names, labels and the parts every kleaf pod shares. */}}

{{- define "kleaf.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name; each role appends "-allocator", "-gateway" or "-producer". */}}
{{- define "kleaf.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kleaf.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "kleaf.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kleaf
{{- end }}

{{/* dict "root" $ "role" "gateway" */}}
{{- define "kleaf.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kleaf.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "kleaf.roleLabels" -}}
{{ include "kleaf.labels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "kleaf.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kleaf.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the admin token, and its key. */}}
{{- define "kleaf.adminTokenSecret" -}}
{{- default (printf "%s-admin-token" (include "kleaf.fullname" .)) .Values.adminToken.existingSecret }}
{{- end }}

{{- define "kleaf.adminTokenKey" -}}
{{- if .Values.adminToken.existingSecret }}{{ .Values.adminToken.key }}{{ else }}admin.token{{ end }}
{{- end }}

{{- define "kleaf.statePath" -}}/var/lib/kleaf/state{{- end }}
{{- define "kleaf.adminTokenFile" -}}/etc/kleaf/admin/admin.token{{- end }}

{{/*
The kleaf config of one role (dict "root" $ "role" "gateway"): .Values.config, the role's config
merged over it, then the keys the chart owns. node.id is not in it: KLEAF_NODE__ID gives it.
*/}}
{{- define "kleaf.roleConfig" -}}
{{- $root := .root }}
{{- $values := index $root.Values .role }}
{{- $config := mergeOverwrite (deepCopy ($root.Values.config | default dict)) (deepCopy ($values.config | default dict)) }}
{{- range $section, $keys := dict "node" (list "id") "http" (list "listen" "tls") "state" (list "path") "admin" (list "token" "token_file") }}
{{- $given := get $config $section }}
{{- range $key := $keys }}
{{- if and (kindIs "map" $given) (hasKey $given $key) }}
{{- fail (printf "config %s.%s: the chart sets it (docs/operations.md, \"Kubernetes\"); remove it from the values" $section $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not (dig "kafka" "bootstrap" "" $config) }}
{{- fail "config.kafka.bootstrap is required: the Kafka brokers, host:port[,host:port]" }}
{{- end }}
{{- /* Required: left to the brokers' default.replication.factor (1 on a stock Apache Kafka), the
first allocator would create one-replica topics that its own replication check then refuses on a
cluster of 3 brokers or more (exit 2, a crash loop, topics left to reassign). */}}
{{- if not (dig "kafka" "replication_factor" 0 $config) }}
{{- fail "config.kafka.replication_factor is required: the replicas of the topics kleaf creates; 3 on a Kafka of 3 brokers or more (kleaf refuses fewer there: docs/operations.md, \"Replication\"), the number of brokers on a smaller development Kafka" }}
{{- end }}
{{- $host := $root.Values.http.listenAddress | default "0.0.0.0" }}
{{- if and (contains ":" $host) (not (hasPrefix "[" $host)) }}
{{- $host = printf "[%s]" $host }}
{{- end }}
{{- $_ := set $config "http" (merge (dict "listen" (printf "%s:%d" $host (int $values.port))) (get $config "http" | default dict)) }}
{{- with $root.Values.http.tls }}
{{- if .enabled }}
{{- if not .secretName }}
{{- fail "http.tls.secretName is required with http.tls.enabled: a kubernetes.io/tls Secret (tls.crt, tls.key)" }}
{{- end }}
{{- $tls := dict "cert_file" "/etc/kleaf/tls/tls.crt" "key_file" "/etc/kleaf/tls/tls.key" }}
{{- if .clientCA }}
{{- $_ = set $tls "client_ca_file" "/etc/kleaf/tls/ca.crt" }}
{{- end }}
{{- $_ = set (get $config "http") "tls" $tls }}
{{- end }}
{{- end }}
{{- $_ = set $config "state" (dict "path" (include "kleaf.statePath" $root)) }}
{{- if eq .role "gateway" }}
{{- $_ = set $config "admin" (dict "token_file" (include "kleaf.adminTokenFile" $root)) }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/*
The pod template of one role (dict "root" $ "role" "gateway"). Every role runs the image of
.Values.image, with what the role's own `image` sets over it (allocators upgraded first: see
docs/operations.md, "Upgrading on Kubernetes"), as `kleaf <role> --config /etc/kleaf/<role>.yaml`,
node.id from the pod's name.
*/}}
{{- define "kleaf.podTemplate" -}}
{{- $root := .root }}
{{- $role := .role }}
{{- $values := index $root.Values $role }}
{{- $port := int $values.port }}
{{- $persistent := and (eq $role "allocator") $values.persistence.enabled }}
metadata:
  labels:
    {{- include "kleaf.roleLabels" . | nindent 4 }}
  annotations:
    checksum/config: {{ include "kleaf.roleConfig" . | sha256sum }}
    {{- if and (eq $role "gateway") (not $root.Values.adminToken.existingSecret) }}
    checksum/admin-token: {{ include "kleaf.adminTokenValue" $root | sha256sum }}
    {{- end }}
    {{- if $root.Values.metrics.podAnnotations }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ $port | quote }}
    prometheus.io/path: /metrics
    {{- if $root.Values.http.tls.enabled }}
    prometheus.io/scheme: https
    {{- end }}
    {{- end }}
    {{- with $values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "kleaf.serviceAccountName" $root }}
  automountServiceAccountToken: false
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: {{ $values.terminationGracePeriodSeconds }}
  containers:
    - name: kleaf
      {{- $image := mergeOverwrite (deepCopy $root.Values.image) (deepCopy ($values.image | default dict)) }}
      image: "{{ $image.repository }}:{{ $image.tag | default $root.Chart.AppVersion }}"
      imagePullPolicy: {{ $image.pullPolicy }}
      args: [{{ $role }}, --config, /etc/kleaf/{{ $role }}.yaml]
      env:
        - name: KLEAF_NODE__ID
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- if $root.Values.kafkaPropertiesSecret.name }}
        - name: KLEAF_KAFKA__PROPERTIES
          valueFrom:
            secretKeyRef:
              name: {{ $root.Values.kafkaPropertiesSecret.name }}
              key: {{ $root.Values.kafkaPropertiesSecret.key }}
        {{- end }}
        {{- with $root.Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: http
          containerPort: {{ $port }}
          protocol: TCP
      {{- $tls := $root.Values.http.tls }}
      {{- $scheme := ternary "HTTPS" "HTTP" (and $tls.enabled true) }}
      startupProbe:
        {{- if and $tls.enabled $tls.clientCA }}
        tcpSocket: {port: http}
        {{- else }}
        httpGet: {path: /healthz, port: http, scheme: {{ $scheme }}}
        {{- end }}
        {{- toYaml $root.Values.probes.startup | nindent 8 }}
      livenessProbe:
        {{- if and $tls.enabled $tls.clientCA }}
        tcpSocket: {port: http}
        {{- else }}
        httpGet: {path: /healthz, port: http, scheme: {{ $scheme }}}
        {{- end }}
        {{- toYaml $root.Values.probes.liveness | nindent 8 }}
      readinessProbe:
        {{- if and $tls.enabled $tls.clientCA }}
        tcpSocket: {port: http}
        {{- else }}
        httpGet: {path: /readyz, port: http, scheme: {{ $scheme }}}
        {{- end }}
        {{- toYaml $root.Values.probes.readiness | nindent 8 }}
      {{- if and (eq $role "gateway") (gt (int $values.preStopSleepSeconds) 0) }}
      lifecycle:
        preStop:
          exec:
            command: [sleep, {{ $values.preStopSleepSeconds | quote }}]
      {{- end }}
      resources:
        {{- toYaml $values.resources | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/kleaf/{{ $role }}.yaml
          subPath: {{ $role }}.yaml
          readOnly: true
        - name: state
          mountPath: {{ include "kleaf.statePath" $root }}
        {{- if eq $role "gateway" }}
        - name: admin-token
          mountPath: /etc/kleaf/admin
          readOnly: true
        {{- end }}
        {{- if $root.Values.http.tls.enabled }}
        - name: tls
          mountPath: /etc/kleaf/tls
          readOnly: true
        {{- end }}
        {{- with $root.Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "kleaf.fullname" $root }}-config
    {{- if not $persistent }}
    - name: state
      {{- if $values.stateSizeLimit }}
      emptyDir:
        sizeLimit: {{ $values.stateSizeLimit }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- end }}
    {{- if eq $role "gateway" }}
    - name: admin-token
      secret:
        secretName: {{ include "kleaf.adminTokenSecret" $root }}
        items:
          - key: {{ include "kleaf.adminTokenKey" $root }}
            path: admin.token
    {{- end }}
    {{- if $root.Values.http.tls.enabled }}
    - name: tls
      secret:
        secretName: {{ $root.Values.http.tls.secretName }}
    {{- end }}
    {{- with $root.Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $values.spread }}
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: {{ .topologyKey }}
      whenUnsatisfiable: {{ .whenUnsatisfiable }}
      labelSelector:
        matchLabels:
          {{- include "kleaf.selectorLabels" (dict "root" $root "role" $role) | nindent 10 }}
  {{- end }}
  {{- with $values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
The admin token when the chart makes the Secret: adminToken.value; else, with adminToken.generate,
the token the release's Secret already holds (an upgrade keeps it) or a new random one, drawn once
per render. Neither: refused, since a render without the cluster (helm template, Argo CD, Flux)
cannot see the Secret and would draw a new token, and roll the gateways, on every sync.
*/}}
{{- define "kleaf.adminTokenValue" -}}
{{- if not (hasKey . "kleafAdminToken") }}
{{- $token := .Values.adminToken.value }}
{{- if and (not $token) (not .Values.adminToken.generate) }}
{{- fail "adminToken: set adminToken.existingSecret to a Secret of yours (e.g. kubectl create secret generic kleaf-admin --from-literal=admin.token=$(openssl rand -hex 24)), or adminToken.value, or adminToken.generate: true (helm install/upgrade only: a render without the cluster, as GitOps tools do, draws a new token each time)" }}
{{- end }}
{{- if not $token }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "kleaf.adminTokenSecret" .) }}
{{- if and $existing (hasKey ($existing.data | default dict) "admin.token") }}
{{- $token = index $existing.data "admin.token" | b64dec }}
{{- else }}
{{- $token = randAlphaNum 40 }}
{{- end }}
{{- end }}
{{- if lt (len $token) 16 }}
{{- fail "adminToken.value: kleaf needs at least 16 characters" }}
{{- end }}
{{- $_ := set . "kleafAdminToken" $token }}
{{- end }}
{{- get . "kleafAdminToken" }}
{{- end }}
