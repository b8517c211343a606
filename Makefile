# The two commands a newcomer needs: `make run` and `make test`. Both install PostgreSQL's server
# binaries when they are missing and they can (root with apt-get), else say what to install.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
# The race detector needs cgo and a C compiler; without one the tests run without it.
RACE    := $(shell command -v "$$($(GO) env CC 2>/dev/null)" >/dev/null 2>&1 && echo -race)

.PHONY: run test complexity test-pgbouncer test-citus build vet postgres fuzz faults soak api-check metrics-check image-check bench bench-go

## run: a local PostgreSQL of its own, a demo company with sample data, and the server on 127.0.0.1:8080.
run: build postgres
	./rolodex dev

## test: go vet and the whole test suite against a real PostgreSQL (a private one unless DATABASE_URL is set).
test: postgres
	$(GO) vet ./...
	$(GO) test $(RACE) -count=1 -timeout 30m ./...

## complexity: fails when a production function (the root package's non-test files) has a cognitive
## complexity over 25 (gocognit, pinned, installed from the Go module proxy) or is over 80 lines; warns
## over 11,000 lines of production Go; prints the 10 highest scores (.ci/complexity.sh).
complexity:
	GO='$(GO)' bash .ci/complexity.sh

## test-pgbouncer: the whole test suite through PgBouncer in transaction mode, in front of a private
## PostgreSQL (.ci/test-pgbouncer.sh). Installs Debian's pgbouncer when it is missing and it can.
test-pgbouncer: postgres
	@command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "Installing PgBouncer (apt-get install pgbouncer)..."; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; \
		else echo "PgBouncer is missing. Install it with: sudo apt-get install pgbouncer"; exit 1; fi; }
	GO='$(GO)' RACE='$(RACE)' bash .ci/test-pgbouncer.sh

## test-citus: the whole test suite on a Citus cluster (a coordinator and two workers on loopback,
## .ci/test-citus.sh). Builds Citus from CITUS_SRC (its build.sh, 1-3 minutes, as root) unless that
## version is installed.
CITUS_SRC ?= ../shared/citus
test-citus: postgres
	GO='$(GO)' RACE='$(RACE)' CITUS_SRC='$(CITUS_SRC)' bash .ci/test-citus.sh

FUZZTIME  ?= 30s
SOAK_TIME ?= 60s

## fuzz: each fuzz target (every func Fuzz* in the tests) for FUZZTIME, one worker each. FUZZTIME is a
## duration or a count of runs (5000x); CI gives a count, as a duration can end in a spurious "context
## deadline exceeded" failure in Go 1.26 (go.dev/issue/75804).
fuzz: postgres
	@for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' *_test.go | cut -c6-); do \
		echo "fuzz $$f for $(FUZZTIME)"; \
		$(GO) test -count=1 -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -parallel 1 . || exit 1; \
	done

## faults: a write load while the test's own PostgreSQL is stopped and restarted; webhooks through a
## server's kill -9 and a PostgreSQL restart; the webhooks' pace (about 2 min, loopback). The fault and
## soak tests are behind the faults build tag, outside plain `go test ./...`.
faults: postgres
	$(GO) test -tags faults -count=1 -run '^(TestFaults|TestWebhookThroughput$$)' -v .

## soak: a steady mixed load for SOAK_TIME; reports requests, non-2xx, goroutines and RSS.
soak: postgres
	SOAK_TIME=$(SOAK_TIME) $(GO) test -tags faults -count=1 -run '^TestSoak$$' -v -timeout 30m .

## build: the static binary ./rolodex.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o rolodex .

## postgres: make sure PostgreSQL's server binaries are installed (skipped when DATABASE_URL is set).
postgres:
	@if [ -n "$$DATABASE_URL" ] || command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "Installing PostgreSQL (apt-get install postgresql)..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	else \
		echo "PostgreSQL is missing. Install it with: sudo apt-get install postgresql   (or set DATABASE_URL)"; \
		exit 1; \
	fi

## api-check: the served OpenAPI document checked by redocly lint, a Prism proxy walk of every endpoint,
## and a typed openapi-fetch client compiled against it (needs Node.js and npm; installs clients/node_modules).
api-check: postgres
	bash clients/check.sh

## metrics-check: `rolodex dev` with -metrics-addr, a few requests, and the whole GET /metrics parsed by
## Debian's python3-prometheus-client (.ci/metrics-check.sh; installs it when missing and it can).
metrics-check: postgres
	bash .ci/metrics-check.sh

## image-check: the Dockerfile's static binary, proven without Docker: no dynamic dependencies, and
## `rolodex version` and `rolodex serve` run in an empty root directory holding nothing but the binary.
image-check: postgres
	bash .ci/image-check.sh

## bench: the load benchmark, bench/main.go (a few minutes; installs wrk). It builds this tree's server
## and, with BASELINE=<git rev>, that revision's; loads 2 companies of BENCH_CONTACTS contacts into a
## PostgreSQL of its own (kept in BENCH_DIR for the next run of the same size); runs wrk at 32
## connections on each scenario against both servers (without BASELINE: against GET /healthz, the HTTP
## ceiling), ROUNDS rounds of BENCH_TIME each, in alternating order; and writes the medians to
## bench/RESULTS.md. BENCH_ONLY=retrieve,list100 runs some scenarios; BENCH_CONTACTS=1000000 is the full load.
## Then BENCH_IMPORT contacts (0: none) are imported by batches of 100 and by single creates, at 32 requests;
## last, another company's retrieve is measured alone and beside 32 heavy counts of the first (issue 44).
## BENCH_METRICS=1 (no BASELINE): this tree's server with -metrics-addr against the same without.
## BENCH_CUSTOM=1 (no BASELINE, no import): the first company's contacts hold custom field values, and
## each custom filter, sort, count and write (issue 31) runs against its built-in equivalent on the
## same server; BENCH_CUSTOM=1 BENCH_CONTACTS=1000000 is issue 31's scale.
## BENCH_ASSOC=1 (no BASELINE, no import): the first company holds BENCH_CONTACTS business records and
## as many associations, and each association page and write (issue 45) runs against its equivalent
## on the same server; BENCH_ASSOC=1 BENCH_CONTACTS=1000000 is issue 45's scale.
## BENCH_SEARCH=1 (no BASELINE, no import): each search's first page (issue 47) runs against the contacts
## list filtered by q of the same text, and a search's last page against its first, on the same server.
## BENCH_SUMMARY=1 (no BASELINE, no import): the first company holds BENCH_CONTACTS business records, and
## each summary (issue 48) runs against its GROUP BY run alone by pgbench; BENCH_CONTACTS=1000000 is the scale.
## BENCH_ACTIVITIES=1 (no BASELINE, no import): the first company also holds BENCH_CONTACTS activities,
## and each activity page, timeline page and create (issue 46) runs against its equivalent.
## BENCH_PACE=off,64,128,256 (no BASELINE; issue 49): for each setting of the contacts' trigram index (off: its
## pending list off, as the schema has it; a number: on, with that gin_pending_list_limit in kB), the first
## company's creates and PATCHes under a steady load (p99, longest, pending rows), the import with its CPU a
## row and another company's creates during it, and the floors: pgbench of the statements the server sent
## for a batch of 100 creates and for a PATCH with custom values (bench/pace.go).
BENCH_TIME     ?= 5s
ROUNDS         ?= 3
BENCH_CONTACTS ?= 20000
BENCH_DIR      ?= /var/tmp/rolodex-bench
BASELINE       ?=
BENCH_ONLY     ?=
BENCH_IMPORT   ?= 100000
BENCH_METRICS  ?=
BENCH_CUSTOM   ?=
BENCH_ASSOC    ?=
BENCH_SEARCH   ?=
BENCH_SUMMARY  ?=
BENCH_ACTIVITIES ?=
BENCH_PACE     ?=
bench: postgres
	@command -v wrk >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "Installing wrk (apt-get install wrk)..."; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; \
		else echo "wrk is missing. Install it with: sudo apt-get install wrk"; exit 1; fi; }
	BENCH_TIME='$(BENCH_TIME)' ROUNDS='$(ROUNDS)' BENCH_CONTACTS='$(BENCH_CONTACTS)' BENCH_DIR='$(BENCH_DIR)' \
		BASELINE='$(BASELINE)' BENCH_ONLY='$(BENCH_ONLY)' BENCH_IMPORT='$(BENCH_IMPORT)' BENCH_METRICS='$(BENCH_METRICS)' \
		BENCH_CUSTOM='$(BENCH_CUSTOM)' BENCH_ASSOC='$(BENCH_ASSOC)' BENCH_SEARCH='$(BENCH_SEARCH)' BENCH_SUMMARY='$(BENCH_SUMMARY)' \
		BENCH_ACTIVITIES='$(BENCH_ACTIVITIES)' BENCH_PACE='$(BENCH_PACE)' $(GO) run ./bench

## bench-go: the Go micro-benchmarks (encoding a page of contacts).
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 .
