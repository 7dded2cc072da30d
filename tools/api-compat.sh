#!/usr/bin/env bash
# `make api-compat`: the contract against the highest released one (spec/released/).
#   - spec version == highest released: the spec must equal that released file byte for byte
#     (any edit without a version move fails);
#   - spec version  > highest released: `redocly diff` must pass with the version move required
#     (a breaking change needs a new major, an additive one a new minor, a description a patch);
#     on main (or API_COMPAT_REQUIRE_RELEASED=1) the new version must also be released;
#   - spec version  < highest released: fails.
# Usage: tools/api-compat.sh [SPEC]; API_COMPAT_RELEASED_DIR names another released folder (tests).
set -euo pipefail
cd "$(dirname "$0")/.."
revision="${1:-spec/openapi.yaml}"
released_dir="${API_COMPAT_RELEASED_DIR:-spec/released}"

# info.version of each file given, one per line (one node process: each loads yaml and parses 120 KB).
versions_of() { node -e 'const y=require("yaml");for(const f of process.argv.slice(1))console.log(y.parse(require("fs").readFileSync(f,"utf8")).info.version)' "$@"; }

base="$(ls "$released_dir"/openapi-*.yaml | sort -V | tail -1)"
versions="$(versions_of "$base" "$revision")"
base_version="$(sed -n 1p <<<"$versions")"
version="$(sed -n 2p <<<"$versions")"
echo "api-compat: ${base} (${base_version}) -> ${revision} (${version})"

if [ "$version" = "$base_version" ]; then
  if cmp -s "$base" "$revision"; then
    echo "api-compat: ${version} is the released contract, unchanged"
    exit 0
  fi
  echo "api-compat: version not moved: ${revision} differs from released ${base} but info.version is still ${version}" >&2
  exit 1
fi
highest="$(printf '%s\n%s\n' "$base_version" "$version" | sort -V | tail -1)"
if [ "$highest" != "$version" ]; then
  echo "api-compat: info.version ${version} is lower than the released ${base_version}" >&2
  exit 1
fi
branch="$(git rev-parse --abbrev-ref HEAD 2>/dev/null || true)"
if [ "${API_COMPAT_REQUIRE_RELEASED:-$([ "$branch" = main ] && echo 1 || echo 0)}" = 1 ]; then
  echo "api-compat: ${version} is not released: copy the spec to ${released_dir}/openapi-${version}.yaml (docs/compatibility.md)" >&2
  exit 1
fi

# Both sides with inherited security spelled out on each operation (tools/inherit-security.mjs).
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
node tools/inherit-security.mjs "$base" "$work/released.yaml"
node tools/inherit-security.mjs "$revision" "$work/revision.yaml"
node_modules/.bin/redocly diff "$work/released.yaml" "$work/revision.yaml" --config spec/released/redocly-diff.yaml \
  --fail-on=none --check-version --format=markdown
