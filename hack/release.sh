#!/usr/bin/env bash
# make release VERSION=v0.x.y: everything a release publishes, into DIST
# (docs/release.md). Called by the Makefile with VERSION, REVISION, DIST,
# HELM and PLATFORMS set.
set -euo pipefail

if ! [[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: VERSION=$VERSION is not v<major>.<minor>.<patch>[-<pre-release>]: run make release VERSION=v0.2.0" >&2
  exit 2
fi
if [[ -n $(git status --porcelain 2>/dev/null) ]]; then
  echo "release: warning: the working tree has uncommitted changes; the release is built from them, stamped $REVISION" >&2
fi
chart_version=${VERSION#v}
# Every time in the image and the SBOMs is the commit's, unless set.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
start=$SECONDS
rm -rf "$DIST"
mkdir -p "$DIST"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo ">> The image for $PLATFORMS, its OCI archive and SBOMs (each platform compiles the manager once on a cold cache: minutes on 2 cores)"
go run ./dev/image --out "$work/oci" --version "$VERSION" --revision "$REVISION" --platforms "$PLATFORMS" \
  --tar "$DIST/rainbow-manager-$VERSION.oci.tar" --sbom "$DIST"

echo ">> The charts, version $chart_version, appVersion $VERSION"
for chart in rainbow-crds rainbow; do
  "$HELM" package "charts/$chart" --version "$chart_version" --app-version "$VERSION" --destination "$DIST" >/dev/null
done

echo ">> The CRDs as one file"
for f in config/crd/bases/*.yaml; do
  echo "---"
  cat "$f"
done >"$DIST/rainbow-crds-$VERSION.yaml"

(cd "$DIST" && sha256sum -- * >SHA256SUMS)
echo ">> $DIST, in $((SECONDS - start)) s:"
ls -l "$DIST"
