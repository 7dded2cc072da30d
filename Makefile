# Two commands do all set-up on a fresh machine: `make run` and `make test`.
.PHONY: format key api-compat sdk-check smoke-node bench-tools bench-scale bench-hostile bench-cpu bench-otel bench-otel-instructions bench-soak test-alerts test-readme run dev test generate check-generated typecheck lint migrate build bench bench-telemetry bench-learner-data contract clean

NPM_STAMP := node_modules/.package-lock.json

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund

node_modules: $(NPM_STAMP)

# tap rebuilds its Test class when package.json's plugins differ from the ones it was built with,
# but the run that rebuilds has already chosen its loaders: the first `tap` after `npm ci` loads
# @tapjs/typescript (ts-node) into every test file, which nearly doubles its CPU.
# Built here first, whenever node_modules or package.json is newer.
TAP_STAMP := node_modules/.tap-built

$(TAP_STAMP): $(NPM_STAMP) package.json
	npx tap build
	touch $@

# The tests run on the Node.js of the production image (the Dockerfile's NODE_IMAGE), from the
# npm registry's node-<platform>-<arch> package, kept in .cache/ (not a project dependency).
# `make run` and `make smoke-node` use the machine's own Node.js.
IMAGE_NODE_VERSION := $(shell sed -n 's/^ARG NODE_IMAGE=node:\([0-9.]*\)-.*/\1/p' Dockerfile)
$(if $(IMAGE_NODE_VERSION),,$(error the Dockerfile has no ARG NODE_IMAGE=node:<version>-... line))
IMAGE_NODE_PLATFORM := $(shell node -p 'process.platform + "-" + process.arch')
IMAGE_NODE_DIR := .cache/node-$(IMAGE_NODE_VERSION)
IMAGE_NODE_BIN := $(IMAGE_NODE_DIR)/node_modules/node-$(IMAGE_NODE_PLATFORM)/bin
ON_IMAGE_NODE := PATH="$(CURDIR)/$(IMAGE_NODE_BIN):$$PATH"

$(IMAGE_NODE_BIN)/node:
	npm install --prefix $(IMAGE_NODE_DIR) --no-save --no-audit --no-fund --loglevel=error node-$(IMAGE_NODE_PLATFORM)@$(IMAGE_NODE_VERSION)

build: node_modules
	npm run build

## Runs the service on PORT (3000); embedded PostgreSQL (PGlite, .data/) unless DATABASE_URL is set.
run: build
	npm start

## Runs the service from TypeScript sources (no build step).
dev: node_modules
	npm run dev

## Runs every test, on the production image's Node.js, against PostgreSQL (TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres).
test: node_modules $(TAP_STAMP) $(IMAGE_NODE_BIN)/node
	$(ON_IMAGE_NODE) npm test

## Alert rules: promtool check and unit tests (deploy/prometheus; also run by `make test`).
test-alerts:
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts.test.yml

## Runs the README's sh blocks in order against a fresh server (also run by `make test`).
test-readme: node_modules $(TAP_STAMP) $(IMAGE_NODE_BIN)/node
	$(ON_IMAGE_NODE) npm test -- .build/test/readme/readme-walk.test.js

## Regenerates generated/ from spec/openapi.yaml.
generate: node_modules
	npm run generate

## Fails when generated/ differs from what spec/openapi.yaml produces.
check-generated: generate
	@git diff --exit-code --stat -- generated/ || (echo "generated/ is stale: run 'make generate' and commit it" && exit 1)
	@test -z "$$(git status --porcelain -- generated/)" || (git status --porcelain -- generated/ && echo "generated/ has untracked files: run 'make generate' and commit it" && exit 1)

## Biome writes its formatting into the code (make lint checks it).
format: node_modules
	npx biome format --write

typecheck: node_modules
	npm run typecheck

## Type-check, Biome on the code, Redocly and Spectral on the contract.
lint: node_modules
	npm run lint

## Makes a partner API key: ID=acme [SCOPES=a,b] [SYSTEMS=uuid,...] [RATE_MAX= RATE_WINDOW_MS=] [EXPIRES_AT=]; prints the secret once and its API_KEYS_FILE entry.
key: node_modules
	@npx tsx tools/make-key.ts

## The contract against the highest released one (spec/released/): an edit needs a version move, a breaking one a new major; docs/compatibility.md.
api-compat: node_modules
	./tools/api-compat.mjs

## The built server on the machine's own Node.js (the tests run on the image's): ready, create and read a user.
smoke-node: build
	npx tsx tools/smoke-node.ts "$$(command -v node)"

## Clients generated from the served /openapi.json by openapi-typescript + openapi-fetch, @hey-api/openapi-ts and orval: tsc --strict, a walk through every operation on the service, and on a Prism mock; the docs/integrators.md commands as written; a 1.1.1 client's own walk.
sdk-check: node_modules tools/sdk/node_modules/.package-lock.json
	npx tsx tools/sdk-check.ts

tools/sdk/node_modules/.package-lock.json: tools/sdk/package.json tools/sdk/package-lock.json
	npm ci --prefix tools/sdk --no-audit --no-fund

## Applies pending migrations to DATABASE_URL.
migrate: node_modules
	npm run migrate

## Telemetry at scale: N events through the batch API (default 100M, tens of GB; BENCH_EVENTS=2000000 for less), disk per event, KPIs, two days archived at the KPI horizon and dropped (one as seeded, one out of the page cache as at retention age), an erasure. BENCH_DAYS=3 BENCH_EVENTS=42900000: the 100M week's density in three days; BENCH_KEEP=1 keeps the database.
bench-telemetry: node_modules
	npx tsx bench/telemetry.ts

## The export of a learner with 10,000 notes: time to the last byte and the server's RSS growth (targets < 2 s, < 50 MB); then its erasure (bench/learner-data.md). BENCH_NOTES, BENCH_LOGS, BENCH_RUNS.
bench-learner-data: build
	npx tsx bench/learner-data.ts

## The service behind Stoplight Prism (proxy, --errors): every operation's success and business errors.
contract: node_modules
	npx tsx tools/contract-proxy.ts
	CONTRACT_SELF_CHECK=1 npx tsx tools/contract-proxy.ts > /dev/null

## Service vs bare Fastify + postgres.js ceiling, PostgreSQL off and on the servers' core (set-ups a, b), with each server's CPU per request and its core's busy share, and the KPIs over 10M events (writes bench/results.md). BENCH_DURATION, BENCH_RUNS, BENCH_CONNECTIONS, BENCH_SETUPS, BENCH_CASES; BENCH_OTEL=0.1 traces at that sampling ratio (prints only).
bench: build
	taskset -c 1 npx tsx bench/run.ts

## CPU per request on the servers' core, server and PostgreSQL apart: GET user and the replayed POST, on the service and on the ceiling.
bench-cpu: build
	taskset -c 1 npx tsx bench/cpu-split.ts

## What tracing costs: the service's CPU per request untraced and at BENCH_OTEL_RATIOS (default 0.1,1) sampling, GET user and POST user (new key), in alternating rounds on the servers' core (BENCH_OTEL_TOGETHER=1: all at once), the part off each server's main thread shown apart, and an untraced twin for the noise floor.
bench-otel: build
	taskset -c 1 npx tsx bench/otel-cpu.ts

## The same as instructions per request, counted by valgrind's callgrind (unmoved by other work on the machine; slow: minutes per ratio). BENCH_REQUESTS, BENCH_CONNECTIONS; ratios as arguments: make bench-otel-instructions RATIOS="off 0.1 1".
bench-otel-instructions: build
	npx tsx bench/otel-instructions.ts $(RATIOS)

## Ten minutes of mixed load (SOAK_SECONDS, SOAK_SETUP node-bound or shared): throughput and RSS per minute within ±10 % from the second minute on, beside a fixed piece of work timed on each core (bench/soak.md).
bench-soak: build
	taskset -c 1 npx tsx bench/soak.ts

## 1, 2 and 3 replicas behind HAProxy (shared PostgreSQL and Redis), and GET user with the Redis vs in-memory rate-limit store (bench/scale.md). BENCH_DURATION, BENCH_CONNECTIONS (the balancer table); BENCH_RUNS, BENCH_COMPARE_DURATION, BENCH_COMPARE_CONNECTIONS (the comparison); BENCH_REPLICAS= runs the comparison alone.
bench-scale: build bench-tools
	taskset -c 1 npx tsx bench/scale.ts

## Debian packages the benchmarks start (wrk, HAProxy, redis-server), installed when missing.
bench-tools:
	@missing=$$(for c in wrk haproxy redis-server; do command -v $$c >/dev/null || echo $$c; done); \
	if [ -n "$$missing" ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; fi

## The HTTP edge under hostile load (built server): 1 MiB amplification, stalled uploads, an address flood, 4x overload.
bench-hostile: build
	npx tsx bench/hostile.ts

clean:
	rm -rf dist .build .tap coverage
