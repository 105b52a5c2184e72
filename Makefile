# whguard: the README's commands.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin

.PHONY: test test-short build demo fuzz vet bench

## test: the whole suite against real PostgreSQL and Redis (found or started).
test:
	$(GO) vet ./...
	./.ci/with-services.sh $(GO) test -race -count=1 -timeout 20m ./...

## build: the whguard binary in ./bin.
build:
	$(GO) build -o bin/whguard ./cmd/whguard

## fuzz: each fuzz target for a short while.
fuzz:
	@for t in $$($(GO) test -list '^Fuzz' ./verify/ | grep ^Fuzz); do \
		$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 20s ./verify/ || exit 1; done
