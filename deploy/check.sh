#!/usr/bin/env bash
# Checks everything in deploy/ without a cluster, a Docker engine or a running Prometheus:
#   1. promtool check config / check rules / test rules (each alert fired on synthetic series)
#   2. the PrometheusRule in k8s/monitoring matches the rule files (it is generated from them)
#   3. kubectl kustomize renders the cpu, gpu, monitoring and JobSet-example kustomizations and the cpu overlay
#      with the optional patches; a structural test checks every rendered object
#   4. yamllint over deploy/
#   5. the Grafana dashboard and the rules use only metrics the daemons export: read from a live
#      scrape of a real coordinator + 2 workers running a tiny job when the binaries are built
#      (PIPETRAIN_BUILD_DIR, set by CTest; required then), else from the source registrations.
# Needs: promtool (Debian package prometheus), yamllint, python3-yaml, and a kubectl with
# `kubectl kustomize`: whichever is on PATH (a preinstalled `kubectl` package, or Debian's
# kubernetes-client, which conflicts with it, where none is). Set KUBECTL / PROMTOOL to use other
# binaries. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start=$(date +%s)
PY=/usr/bin/python3  # Debian's python3 (python3-yaml), not whatever python3 is first on PATH
PROMTOOL=${PROMTOOL:-promtool}
KUBECTL=${KUBECTL:-kubectl}

need() {  # need TOOL HOW-TO-GET-IT
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "deploy/check.sh: FAIL: '$1' not found: $2 (scripts/setup.sh should)" >&2
    exit 1
  fi
}
# Which binaries this run uses (kubectl: whatever is first on PATH unless KUBECTL is set).
echo "tools: promtool=$(command -v "$PROMTOOL" || true) kubectl=$(command -v "$KUBECTL" || true)" \
     "yamllint=$(command -v yamllint || true)"
need "$PROMTOOL" "apt-get install prometheus"
need "$KUBECTL" "install a kubectl (apt-get install kubernetes-client where no kubectl package is)"
need yamllint "apt-get install yamllint"
need "$PY" "apt-get install python3"
"$PY" -c 'import yaml' 2>/dev/null || {
  echo "deploy/check.sh: FAIL: python3 has no yaml module: install the Debian package" \
       "'python3-yaml'" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() { echo "== $*"; }

step "promtool check config + rules"
"$PROMTOOL" check config deploy/prometheus/prometheus.yml
"$PROMTOOL" check rules deploy/prometheus/rules/*.yml

step "promtool test rules (every alert fires on synthetic series; none when healthy)"
"$PROMTOOL" test rules deploy/prometheus/tests/*.yml

step "PrometheusRule is in sync with deploy/prometheus/rules"
"$PY" deploy/prometheus/make_prometheusrule.py > "$tmp/prometheusrule.yaml"
diff -u deploy/k8s/monitoring/prometheusrule.yaml "$tmp/prometheusrule.yaml" || {
  echo "FAIL: regenerate: deploy/prometheus/make_prometheusrule.py >" \
       "deploy/k8s/monitoring/prometheusrule.yaml"; exit 1; }
echo "in sync"

step "kubectl kustomize + structural test"
for variant in cpu gpu; do
  "$KUBECTL" kustomize "deploy/k8s/overlays/$variant" > "$tmp/$variant.yaml"
  "$PY" deploy/tests/check_manifests.py --repo "$repo" --variant "$variant" "$tmp/$variant.yaml"
done
"$KUBECTL" kustomize deploy/k8s/monitoring > "$tmp/monitoring.yaml"
"$PY" deploy/tests/check_manifests.py --repo "$repo" --variant monitoring "$tmp/monitoring.yaml"
"$KUBECTL" kustomize deploy/k8s/examples/jobset > "$tmp/jobset.yaml"
"$PY" deploy/tests/check_manifests.py --repo "$repo" --variant jobset "$tmp/jobset.yaml"
# Each optional patch, as docs/deploy.md tells users to add it (kustomize wants patches inside
# the kustomization's directory, so copy each next to a temporary overlay on the cpu one; v2
# rejects absolute base paths). auth-token and tls replace the coordinator's args, so they are
# alternatives: combining them means writing one args list with both; cluster-secret only adds
# env entries.
for option in auth-token tls cluster-secret; do
  mkdir -p "$tmp/$option"
  cp "deploy/k8s/optional/$option.yaml" "$tmp/$option/"
  cpu_base=$(realpath --relative-to="$tmp/$option" deploy/k8s/overlays/cpu)
  printf 'namespace: pipetrain\nbases:\n  - %s\npatchesStrategicMerge:\n  - %s.yaml\n' \
    "$cpu_base" "$option" > "$tmp/$option/kustomization.yaml"
  "$KUBECTL" kustomize "$tmp/$option" > "$tmp/$option.yaml"
  "$PY" deploy/tests/check_manifests.py --repo "$repo" --variant "$option" "$tmp/$option.yaml"
done

step "yamllint"
yamllint -s -c deploy/.yamllint deploy/
echo "yamllint clean"

step "dashboard + rules vs exported metrics"
if [ -n "${PIPETRAIN_BUILD_DIR:-}" ]; then
  "$PY" deploy/tests/live_scrape.py "$PIPETRAIN_BUILD_DIR" > "$tmp/exported.txt"
  "$PY" deploy/tests/check_dashboard.py --repo "$repo" --exported "$tmp/exported.txt"
else
  echo "(PIPETRAIN_BUILD_DIR unset: names from the source; CTest runs the live scrape)"
  "$PY" deploy/tests/check_dashboard.py --repo "$repo"
fi

echo "deploy/check.sh: all checks passed in $(( $(date +%s) - start ))s"
