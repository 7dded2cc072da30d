# Two commands do all set-up on a fresh machine: `make run` and `make test`.
.PHONY: bench-ingest bench-scheduler drill-failover drill-restore format key reset api-compat sdk-check smoke-node bench-tools mutation test-alerts test-readme test-suite test-checks test-deps supported-node run dev test generate check-generated typecheck lint migrate build bench contract clean

# The production image's Node.js (the Dockerfile's NODE_IMAGE), from the npm registry's
# node-<platform>-<arch> package, kept in .cache/ (not a project dependency). The tests run on it.
IMAGE_NODE_VERSION := $(shell sed -n 's/^ARG NODE_IMAGE=node:\([0-9.]*\)-.*/\1/p' Dockerfile)
$(if $(IMAGE_NODE_VERSION),,$(error the Dockerfile has no ARG NODE_IMAGE=node:<version>-... line))
# One call of the machine's Node.js: its platform, its version, and whether it is supported.
MACHINE_NODE_FACTS := $(shell node -p '[process.platform + "-" + process.arch, process.versions.node, (([a, b]) => (a === 22 && b >= 19) || a >= 24)(process.versions.node.split(".").map(Number))].join(" ")' 2>/dev/null)
IMAGE_NODE_PLATFORM := $(word 1,$(MACHINE_NODE_FACTS))
IMAGE_NODE_DIR := .cache/node-$(IMAGE_NODE_VERSION)
IMAGE_NODE_BIN := $(IMAGE_NODE_DIR)/node_modules/node-$(IMAGE_NODE_PLATFORM)/bin
ON_IMAGE_NODE := PATH="$(CURDIR)/$(IMAGE_NODE_BIN):$$PATH"

$(IMAGE_NODE_BIN)/node:
	npm install --prefix $(IMAGE_NODE_DIR) --no-save --no-audit --no-fund --loglevel=error --engine-strict=false node-$(IMAGE_NODE_PLATFORM)@$(IMAGE_NODE_VERSION)

# The service runs on the Node.js LTS lines 22 (22.19+) and 24 (package.json's engines). On
# another, such as an end-of-life 20, every target (npm ci included) runs on the image's Node.js
# instead, fetched as above, and says so in one line.
MACHINE_NODE := $(word 2,$(MACHINE_NODE_FACTS))
NODE_SUPPORTED := $(word 3,$(MACHINE_NODE_FACTS))
ifeq ($(NODE_SUPPORTED),true)
supported-node: ;
else
export PATH := $(CURDIR)/$(IMAGE_NODE_BIN):$(PATH)
supported-node: $(IMAGE_NODE_BIN)/node
	@echo "Node.js $(or $(MACHINE_NODE),(none)) is not supported (22 or 24): running on Node.js $(IMAGE_NODE_VERSION) from .cache/" >&2
endif

# npm's record of the installed tree: an install, full or not, newer than package.json and the lock.
INSTALL_CURRENT := [ node_modules/.package-lock.json -nt package-lock.json ] && [ node_modules/.package-lock.json -nt package.json ]

# Every dependency: the tests, the linters and the tools need them (tap is one, a production install lacks it).
NPM_STAMP := node_modules/.installed-all

$(NPM_STAMP): package.json package-lock.json | supported-node
	@if $(INSTALL_CURRENT) && [ -x node_modules/.bin/tap ]; then :; else npm ci --no-audit --no-fund; fi
	@touch $@ $(RUN_STAMP)

node_modules: $(NPM_STAMP)

# What running needs, when nothing more is installed: the production dependencies (a small part
# of the lock's packages; Pact, Redocly, Spectral, tap and the like are for the tests and the tools) and,
# to build, the lock's TypeScript kept in .cache/. A full install serves `make run` as well.
RUN_STAMP := node_modules/.installed-run
TYPESCRIPT_VERSION := $(shell sed -n '/"node_modules\/typescript": {/,/"version"/s/.*"version": "\(.*\)".*/\1/p' package-lock.json)
CACHED_TSC := .cache/typescript-$(TYPESCRIPT_VERSION)/node_modules/.bin/tsc

$(RUN_STAMP): package.json package-lock.json | supported-node
	@if $(INSTALL_CURRENT); then :; else npm ci --omit=dev --no-audit --no-fund; fi
	@touch $@

$(CACHED_TSC):
	npm install --prefix .cache/typescript-$(TYPESCRIPT_VERSION) --no-save --no-audit --no-fund --loglevel=error typescript@$(TYPESCRIPT_VERSION)

# tap rebuilds its Test class when package.json's plugins differ from the ones it was built with,
# but the run that rebuilds has already chosen its loaders: the first `tap` after `npm ci` loads
# @tapjs/typescript (ts-node) into every test file, which nearly doubles its CPU.
# Built here first, whenever node_modules or package.json is newer.
TAP_STAMP := node_modules/.tap-built

$(TAP_STAMP): $(NPM_STAMP) package.json
	npx tap build
	touch $@

# Built only when a source changed (tsc is also incremental: dist/.tsbuildinfo).
BUILD_STAMP := dist/.built
BUILD_SOURCES := $(shell find src handlers generated -type f) tsconfig.json tsconfig.build.json

# npm run puts node_modules/.bin first: a full install's tsc, else the cached one. Targets that also
# need the full install list node_modules before build, so that one install serves both.
$(BUILD_STAMP): $(RUN_STAMP) $(BUILD_SOURCES)
	@test -x node_modules/.bin/tsc || $(MAKE) --no-print-directory $(CACHED_TSC)
	PATH="$(CURDIR)/$(dir $(CACHED_TSC)):$$PATH" npm run build
	@touch $@

build: $(BUILD_STAMP)

## Runs the service on PORT (3000); embedded PostgreSQL (PGlite, .data/) unless DATABASE_URL is set.
run: $(BUILD_STAMP) | supported-node
	node dist/src/server.js

## Deletes the embedded database (PGLITE_DATA_DIR, default .data/pglite) so that the next `make run` starts on a fresh one; refuses while a server runs on it.
reset:
	@dir="$${PGLITE_DATA_DIR:-.data/pglite}"; pid=$$(cat "$$dir/study-service.lock" 2>/dev/null); \
	if [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null; then echo "make reset: process $$pid runs on $$dir: stop it first" >&2; exit 1; fi; \
	rm -rf "$$dir" && echo "make reset: $$dir removed; the next make run starts on a fresh database"

## Runs the service from TypeScript sources (no build step).
dev: node_modules
	npm run dev

## Everything CI runs, set-up included: Debian packages and the local PostgreSQL (tools/install-test-deps.sh), npm ci, then check-generated, then the tests (test-suite) while lint, api-compat, sdk-check and smoke-node run beside them.
# The tests leave CPU idle while they wait on servers and timers; the other checks fill it. Each
# target's output is printed whole when it ends. generate runs first: the tests copy generated/;
# so does tap's build, which rewrites the types lint reads.
test: test-deps node_modules $(TAP_STAMP) tools/sdk/node_modules/.package-lock.json
	@$(MAKE) --no-print-directory check-generated
	@$(MAKE) --no-print-directory -j2 --output-sync=recurse test-suite test-checks

# What make test runs beside the tests, one after another. lint, api-compat and sdk-check run at
# a lower priority: they take the CPU the tests leave and do not slow the drills' timed failovers.
# smoke-node does not: it starts the service with production settings, load shedding included.
test-checks:
	@nice -n 10 $(MAKE) --no-print-directory lint
	@nice -n 10 $(MAKE) --no-print-directory api-compat
	@nice -n 10 $(MAKE) --no-print-directory sdk-check
	@$(MAKE) --no-print-directory smoke-node

## Debian packages the tests need, installed when missing, and the local PostgreSQL, started when down.
test-deps:
	@./tools/install-test-deps.sh

## The tests alone, on the production image's Node.js, against PostgreSQL (TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres); one file: make test-suite TESTS=.build/test/users/create-user.test.js
# Without the parallel make's jobserver, which the make commands that tests run cannot reach.
test-suite: node_modules $(TAP_STAMP) $(IMAGE_NODE_BIN)/node
	MAKEFLAGS='$(filter-out -j% -O% --jobserver-auth=%,$(MAKEFLAGS))' $(ON_IMAGE_NODE) npm test -- $(TESTS)

## Failover drill: etcd, three Patroni nodes (synchronous mode strict) and HAProxy from deploy/, the service under write load while the primary crashes, freezes past the leader TTL, and is switched over; Patroni promotes, nobody else (also run by `make test`).
drill-failover: test-deps
	@$(MAKE) --no-print-directory test-suite TESTS=.build/test/drills/failover.test.js

## Restore drill: pgBackRest full backup under load, restore to the latest state and to a point in time (also run by `make test`).
drill-restore: test-deps
	@$(MAKE) --no-print-directory test-suite TESTS=.build/test/drills/restore.test.js

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

## Type-check, Biome on the code, Redocly and Spectral on the contract, Redocly (strict) on its Arazzo workflows.
lint: node_modules
	npm run lint

## Makes a partner API key: ID=acme [SCOPES=a,b] [SYSTEMS=uuid,...] [RATE_MAX= RATE_WINDOW_MS=] [MAX_CONCURRENT_REQUESTS= MAX_BODY_BYTES_IN_FLIGHT=] [EXPIRES_AT=] [KEYS_FILE=file]; prints the secret once and appends its entry to KEYS_FILE (else prints a one-entry API_KEYS_FILE).
# It needs only the build `make run` uses: no package is installed and nothing is rebuilt after it.
key: $(BUILD_STAMP)
	@node dist/src/auth/make-key.js

## The contract against the highest released one (spec/released/): an edit needs a version move, a breaking one a new major; docs/compatibility.md.
api-compat: node_modules
	./tools/api-compat.mjs

## The built server on the machine's own Node.js (the tests run on the image's; an unsupported machine Node.js is replaced as above): ready, create and read a user.
smoke-node: node_modules build
	npx tsx tools/smoke-node.ts "$$(command -v node)"

## Clients generated from the served /openapi.json by openapi-typescript + openapi-fetch, @hey-api/openapi-ts and orval: tsc --strict, a walk through every operation on the service, and on a Prism mock; the docs/integrators.md commands as written; a 1.1.1 client's own walk.
sdk-check: node_modules tools/sdk/node_modules/.package-lock.json
	npx tsx tools/sdk-check.ts

tools/sdk/node_modules/.package-lock.json: tools/sdk/package.json tools/sdk/package-lock.json | supported-node
	npm ci --prefix tools/sdk --no-audit --no-fund

## Mutation testing (StrykerJS, tools/mutation/) of idempotency, auth, the telemetry lifecycle and erasure, the user and conspectus repositories, each with its own test files, incremental; writes bench/mutation.md. MUTATION_MODULES="auth users" for some; MUTATION_MUTATE="file:line:column-line:column ..." retests only those ranges. Slow (minutes per module on 2 cores): not in CI.
mutation: node_modules $(TAP_STAMP) $(IMAGE_NODE_BIN)/node tools/mutation/node_modules/.package-lock.json
	$(ON_IMAGE_NODE) node tools/mutation/run.mjs

tools/mutation/node_modules/.package-lock.json: tools/mutation/package.json tools/mutation/package-lock.json
	npm ci --prefix tools/mutation --no-audit --no-fund

## Applies pending migrations to DATABASE_URL.
migrate: node_modules
	npm run migrate

## Schedule policies on simulated learners (half-life-regression memory, fixed seed): Leitner and FSRS at 0.80, 0.85, 0.90 desired retention, through the service's scheduling code; reviews per note per year, true recall at review and on a random day (bench/scheduler.md). BENCH_LEARNERS, BENCH_SEED.
bench-scheduler: node_modules
	npx tsx bench/scheduler.ts

## The service behind Stoplight Prism (proxy, --errors): every operation's success and business errors.
contract: node_modules
	npx tsx tools/contract-proxy.ts
	CONTRACT_SELF_CHECK=1 npx tsx tools/contract-proxy.ts > /dev/null

## Service vs an expert's bare Fastify + postgres.js ceiling, driven by wrk, PostgreSQL off and on the servers' core (set-ups a, b), with each server's CPU per request, its core's busy share, PostgreSQL's CPU and what limited each case, and the KPIs over 10M events (writes bench/results.md). BENCH_DURATION, BENCH_RUNS, BENCH_CONNECTIONS, BENCH_SETUPS, BENCH_CASES; BENCH_OTEL=0.1 traces at that sampling ratio (prints only).
bench: node_modules build bench-tools
	taskset -c 1 npx tsx bench/run.ts

## Telemetry ingest with the docs-search analytics rollup (trigger + refresh, as shipped) against ingest without it, on fresh copies of one seeded database, rounds alternating; the median ratio of events/s, batch p99, PostgreSQL CPU per event and its wait events (writes bench/ingest.md; docs/performance.md). BENCH_DURATION (s a round, 300), BENCH_RUNS (pairs, 3), BENCH_WARMUP, BENCH_CONNECTIONS, BENCH_SEARCHES (seeded searches of 4 events).
bench-ingest: node_modules build bench-tools
	taskset -c 1 npx tsx bench/ingest.ts

## The benchmark's load generator (Debian's wrk), installed when missing.
bench-tools:
	@missing=$$(for c in wrk; do command -v $$c >/dev/null || echo $$c; done); \
	if [ -n "$$missing" ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; fi

clean:
	rm -rf dist .build .tap coverage
