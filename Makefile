# Two commands do all set-up on a fresh machine: `make run` and `make test`.
.PHONY: key bench-hostile bench-cpu bench-soak run dev test generate check-generated typecheck lint migrate build bench bench-telemetry contract clean

NPM_STAMP := node_modules/.package-lock.json

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund

node_modules: $(NPM_STAMP)

build: node_modules
	npm run build

## Runs the service on PORT (3000); embedded PostgreSQL (PGlite, .data/) unless DATABASE_URL is set.
run: build
	npm start

## Runs the service from TypeScript sources (no build step).
dev: node_modules
	npm run dev

## Runs every test against PostgreSQL (TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres).
test: node_modules
	npm test

## Regenerates generated/ from spec/openapi.yaml.
generate: node_modules
	npm run generate

## Fails when generated/ differs from what spec/openapi.yaml produces.
check-generated: generate
	@git diff --exit-code --stat -- generated/ || (echo "generated/ is stale: run 'make generate' and commit it" && exit 1)
	@test -z "$$(git status --porcelain -- generated/)" || (git status --porcelain -- generated/ && echo "generated/ has untracked files: run 'make generate' and commit it" && exit 1)

typecheck: node_modules
	npm run typecheck

## Type-check, Biome on the code, Redocly and Spectral on the contract.
lint: node_modules
	npm run lint

## Makes a partner API key: ID=acme [SCOPES=a,b] [SYSTEMS=uuid,...] [RATE_MAX= RATE_WINDOW_MS=] [EXPIRES_AT=]; prints the secret once and its API_KEYS_FILE entry.
key: node_modules
	@npx tsx tools/make-key.ts

## Applies pending migrations to DATABASE_URL.
migrate: node_modules
	npm run migrate

## Telemetry figures: batch ingest events/s and the metrics query over 1M events.
bench-telemetry: node_modules
	npx tsx bench/telemetry.ts

## The service behind Stoplight Prism (proxy, --errors): every operation's success and business errors.
contract: node_modules
	npx tsx tools/contract-proxy.ts
	CONTRACT_SELF_CHECK=1 npx tsx tools/contract-proxy.ts > /dev/null

## Service vs bare Fastify + postgres.js ceiling (writes bench/results.md). BENCH_DURATION, BENCH_RUNS, BENCH_CONNECTIONS.
bench: build
	taskset -c 1 npx tsx bench/run.ts

## CPU per request on the servers' core, server and PostgreSQL apart: GET user and the replayed POST, on the service and on the ceiling.
bench-cpu: build
	taskset -c 1 npx tsx bench/cpu-split.ts

## Five minutes of mixed load: throughput and RSS must stay flat (bench/soak.md).
bench-soak: build
	taskset -c 1 npx tsx bench/soak.ts

## The HTTP edge under hostile load (built server): 1 MiB amplification, stalled uploads, an address flood, 4x overload.
bench-hostile: build
	npx tsx bench/hostile.ts

clean:
	rm -rf dist .tap coverage
