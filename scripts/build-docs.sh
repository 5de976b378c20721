#!/usr/bin/env bash
# Builds every DocC catalog (`make docs`) with the toolchain's docc, warnings as errors (an unresolved symbol link
# fails the build), into .build/docs/<Module>.doccarchive; checks that the Performance article's table is what the
# committed results give, and that every public declaration has a doc comment (scripts/doc-coverage).
set -euo pipefail
cd "$(dirname "$0")/.."
modules=(Katana KatanaTrace KatanaRouter KatanaRedux KatanaBench KatanaMetrics KatanaInspector)

python3 scripts/perf-table --check

# The symbol graphs, from the builds `make test` and `make test-metrics` leave (each is built here first: nothing to do
# when they are current). KatanaInspector's server API exists only with the InspectorServer trait, which the package
# builds without and Examples/MetricsService enables, so its graph comes from that example's build.
# (scripts/symbol-graphs says why not `swift package dump-symbol-graph`.)
swift build >/dev/null 2>&1 || swift build
inspector_build=$(dirname "$(${MAKE:-make} --no-print-directory -s example-dir EXAMPLE=MetricsService)")
# Built as `make examples` builds it, there (from scratch when the incremental build fails: a file deleted from the
# package since is a "missing input" an example's build of the path dependency cannot get past).
${MAKE:-make} --no-print-directory examples EXAMPLES=MetricsService
graphs=.build/symbolgraph
rm -rf "$graphs"
python3 scripts/symbol-graphs "$graphs" .build \
  Katana KatanaTrace KatanaRouter KatanaRedux KatanaBench KatanaBenchCore KatanaLTTng KatanaDispatchLog \
  KatanaDistributedTracing KatanaMetrics
python3 scripts/symbol-graphs "$graphs" "$inspector_build" KatanaInspector

mkdir -p .build/docs
status=0
for module in "${modules[@]}"; do
  catalog="Sources/$module/$module.docc"
  [ -d "$catalog" ] || { echo "docs: $catalog is missing" >&2; status=1; continue; }
  module_graphs=$(mktemp -d)
  cp "$graphs/$module.symbols.json" "$module_graphs/"
  cp "$graphs/$module"@*.symbols.json "$module_graphs/" 2>/dev/null || true
  echo "docs: $module"
  if ! docc convert "$catalog" --additional-symbol-graph-dir "$module_graphs" \
      --output-path ".build/docs/$module.doccarchive" --fallback-display-name "$module" \
      --fallback-bundle-identifier "org.katana-linux.$module" --warnings-as-errors; then
    status=1
  fi
  rm -rf "$module_graphs"
done
python3 scripts/doc-coverage "$graphs" || status=1
[ $status -eq 0 ] && echo "docs: every catalog built without warnings (.build/docs)"
exit $status
