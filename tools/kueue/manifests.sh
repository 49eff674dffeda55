#!/usr/bin/env bash
# Render Kueue's install manifests from its own Helm chart and cache them.
#
#   tools/kueue/manifests.sh [--no-visibility]    # prints the path of the rendered YAML on stdout
#
# `helm template kueue <chart> -n kueue-system -f tools/kueue/values.yaml`, the chart being
# charts/kueue of sigs.k8s.io/kueue at the version tools/kueue/go.mod requires (from the Go module
# cache; `go mod download` fetches it), helm from tools/helm/build.sh. The module carries no
# rendered manifest (config/default is kustomize), so the chart is the one source: CRDs (with
# their conversion webhooks), RBAC, the manager's ConfigMap, Deployment, Services, webhook
# configurations, the empty Secret Kueue fills with its own certificates, and the visibility
# APIServices. A Namespace kueue-system document comes first, so `kubectl apply -f` installs it
# all. The image is localhost/kueue:<version> (tools/images/build.sh kueue), never pulled.
#
# --no-visibility leaves out the two APIServices (v1beta1/v1beta2.visibility.kueue.x-k8s.io):
# while the API server cannot reach them, discovery of every API group reports an error.
#
# Output: ${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/kueue/manifests-<key>/kueue[-novis].yaml, <key> a
# hash of the module, the values, this script and the helm build; a second run returns at once.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VIS=1
case "${1:-}" in
  "") ;;
  --no-visibility) VIS=0 ;;
  *) echo "usage: tools/kueue/manifests.sh [--no-visibility]" >&2; exit 2 ;;
esac
NAMESPACE=kueue-system
RELEASE=kueue
KUEUE_VERSION="$(awk '/^require sigs.k8s.io\/kueue /{print $3}' "$HERE/go.mod")"
HELM="$(bash "$REPO/tools/helm/build.sh")"
KEY="$( (cat "$HERE/go.mod" "$HERE/go.sum" "$HERE/values.yaml" "$HERE/manifests.sh"; echo "$HELM") | sha256sum | cut -c1-16)"
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs/kueue/manifests-$KEY"
FILE="$OUT/kueue$([[ $VIS == 1 ]] || echo -novis).yaml"
if [[ -f "$FILE" ]]; then
  echo "$FILE"
  exit 0
fi
command -v go >/dev/null || { echo "tools/kueue/manifests.sh: the Go toolchain is needed to find Kueue's chart in the module cache" >&2; exit 2; }
export GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
DIR="$(cd "$HERE" && go mod download sigs.k8s.io/kueue && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
CHART="$DIR/charts/kueue"
[[ -f "$CHART/Chart.yaml" ]] || { echo "tools/kueue/manifests.sh: no chart at $CHART" >&2; exit 1; }
mkdir -p "$OUT"
TMP="$(mktemp "$OUT/.render.XXXXXX")"
trap 'rm -f "$TMP"' EXIT
{
  printf -- '---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n' "$NAMESPACE"
  "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" -f "$HERE/values.yaml" \
    --set "controllerManager.manager.image.tag=$KUEUE_VERSION"
} | if [[ $VIS == 1 ]]; then cat; else
  # helm template starts every document with `---` and `# Source: <chart>/templates/<file>`.
  awk '/^---$/ { held = 1; next }
       held { skip = ($0 ~ /^# Source: kueue\/templates\/visibility\/apiservice_/); if (!skip) print "---"; held = 0 }
       !skip'
fi >"$TMP"
grep -q '^kind: Deployment$' "$TMP" || { echo "tools/kueue/manifests.sh: the rendered chart holds no Deployment" >&2; exit 1; }
chmod 644 "$TMP"
mv "$TMP" "$FILE"
trap - EXIT
echo "$FILE"
