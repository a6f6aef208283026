#!/usr/bin/env bash
# Fetch the browser JavaScript the static book needs from the npm registry into
# book/_vendor/, and check every file against SHA256SUMS so a changed tarball fails
# loudly. vega-lite must match the schema altair emits (altair 6.3.0 -> vega-lite 6.4.1);
# html-manager 1.0.x is the ipywidgets 8 embed manager.
set -euo pipefail
cd "$(dirname "$0")"
VEGA=6.4.0 VEGALITE=6.4.1 EMBED=7.3.0 HTMLMGR=1.0.15 REQUIREJS=2.3.8
out=../_vendor
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && npm pack --silent "vega@$VEGA" "vega-lite@$VEGALITE" "vega-embed@$EMBED" \
    "@jupyter-widgets/html-manager@$HTMLMGR" "requirejs@$REQUIREJS" >/dev/null )
for tarball in "$tmp"/*.tgz; do
  name=$(basename "$tarball" .tgz)
  mkdir -p "$tmp/$name" && tar -xzf "$tarball" -C "$tmp/$name" --strip-components=1
done
rm -rf "$out.tmp" && mkdir -p "$out.tmp/vega" "$out.tmp/widgets"
cp "$tmp/vega-$VEGA/build/vega.min.js"                           "$out.tmp/vega/"
cp "$tmp/vega-lite-$VEGALITE/build/vega-lite.min.js"             "$out.tmp/vega/"
cp "$tmp/vega-embed-$EMBED/build/vega-embed.min.js"              "$out.tmp/vega/"
cp "$tmp/jupyter-widgets-html-manager-$HTMLMGR/dist/embed-amd.js" "$out.tmp/widgets/"
cp "$tmp/requirejs-$REQUIREJS/require.js"                        "$out.tmp/widgets/"
# embed-amd.js's widget styles use Font Awesome and ask for its .woff2 files beside
# itself; browsers take the first format they support, so woff2 is all they fetch.
cp "$tmp/jupyter-widgets-html-manager-$HTMLMGR"/dist/*.woff2      "$out.tmp/widgets/"
cp book.css charts.js "$out.tmp/"
cp widget-paths.js "$out.tmp/widgets/paths.js"
if [[ "${VENDOR_WRITE_SUMS:-}" == 1 ]]; then
  ( cd "$out.tmp" && find . \( -name '*.js' -o -name '*.woff2' \) | sort | xargs sha256sum ) > SHA256SUMS
fi
( cd "$out.tmp" && sha256sum --quiet --check ../_js/SHA256SUMS ) \
  || { echo "vendor.sh: a downloaded file does not match book/_js/SHA256SUMS" >&2; exit 1; }
rm -rf "$out" && mv "$out.tmp" "$out"
echo "vendored $(find "$out" -name '*.js' | wc -l) files into book/_vendor"
