#!/usr/bin/env bash
# `make api-compat`: rates every change of the contract against the last released one
# (the highest version in spec/released/) and fails when info.version does not move by at
# least that much: a breaking change needs a new major, an additive one a new minor.
set -euo pipefail
cd "$(dirname "$0")/.."
revision="${1:-spec/openapi.yaml}"
# API_COMPAT_BASE names another baseline (the tests use one).
released="${API_COMPAT_BASE:-$(ls spec/released/openapi-*.yaml | sort -V | tail -1)}"
echo "api-compat: ${released} -> ${revision}"
# Both sides with inherited security spelled out on each operation (tools/inherit-security.mjs).
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
node tools/inherit-security.mjs "$released" "$work/released.yaml"
node tools/inherit-security.mjs "$revision" "$work/revision.yaml"
node_modules/.bin/redocly diff "$work/released.yaml" "$work/revision.yaml" --config spec/released/redocly-diff.yaml \
  --fail-on=none --check-version --format=markdown
