# whguard: the README's commands.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin

.PHONY: test test-short build demo fuzz vet bench bench-long bench-statements image sidecar-test docs

## test: the whole suite against real PostgreSQL and Redis (found or started),
## then the container part (sidecar-test).
test:
	$(GO) vet ./...
	./.ci/with-services.sh $(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) sidecar-test

## image: deploy/sidecar/Dockerfile built with Podman as localhost/whguard:dev
## (and the example backend as localhost/whguard-orders:dev), never pulling.
image:
	./.ci/with-podman.sh ./.ci/build-images.sh

## sidecar-test: build the images, run them with Podman, kube play the
## embedded manifest, bring the Compose stack up; installs Podman if needed.
sidecar-test:
	WHGUARD_TEST_CONTAINERS=1 ./.ci/with-services.sh ./.ci/with-podman.sh \
		$(GO) test -count=1 -timeout 20m -run 'TestContainers' -v ./deploy/sidecar/

## build: the whguard binary in ./bin.
build:
	$(GO) build -o bin/whguard ./cmd/whguard

## fuzz: each fuzz target for a short while.
fuzz:
	@for t in $$($(GO) test -list '^Fuzz' ./verify/ | grep ^Fuzz); do \
		$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 20s ./verify/ || exit 1; done

## bench: whguard vs a null server and a naive receiver, side by side (< 10 min).
bench:
	./.ci/with-services.sh $(GO) run ./cmd/whguard-bench

## bench-statements: the closed loops of naive-pg and whguard-pg on a throwaway
## PostgreSQL that loads pg_stat_statements, with each run's statements per event
## (results and chart under cmd/whguard-bench/out/statements).
bench-statements:
	WHGUARD_TEST_PG_PRELOAD=pg_stat_statements ./.ci/with-services.sh $(GO) run ./cmd/whguard-bench \
		-only naive-pg,whguard-pg -fixed '' -backlog 0 -slow-backlog 0 \
		-out cmd/whguard-bench/out/statements -chart cmd/whguard-bench/out/statements/chart.png

## bench-long: bench plus 1M events (bounded memory), a 5M-row journal vs an empty one, and retention:
## a day of 5M events expired by DELETE vs by dropping partitions, sizes over simulated days.
bench-long:
	./.ci/with-services.sh $(GO) run ./cmd/whguard-bench -long

## docs: regenerate the reference tables of docs/ (configuration.md, the
## providers' scheme table, the delivery transitions, the journal's indexes
## and their plans) from the code; the test suite fails when stale.
docs:
	WHGUARD_UPDATE_DOCS=1 $(GO) test -count=1 -run 'TestGeneratedDocsAreCurrent' ./cmd/whguard/
	WHGUARD_UPDATE_DOCS=1 ./.ci/with-services.sh $(GO) test -count=1 -run 'TestIndexesAreJustified' ./journal/
