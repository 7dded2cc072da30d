#!/usr/bin/env bash
# `make api-compat`: rates every change of the contract against the last released one
# (the highest version in spec/released/) and fails when info.version does not move by at
# least that much: a breaking change needs a new major, an additive one a new minor.
set -euo pipefail
cd "$(dirname "$0")/.."
revision="${1:-spec/openapi.yaml}"
released="$(ls spec/released/openapi-*.yaml | sort -V | tail -1)"
echo "api-compat: ${released} -> ${revision}"
exec node_modules/.bin/redocly diff "$released" "$revision" --config spec/released/redocly-diff.yaml \
  --fail-on=none --check-version --format=markdown
