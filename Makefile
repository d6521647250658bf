# keel: developer commands. `make check` is what CI runs.
CARGO ?= cargo
export INSTA_UPDATE ?= no

.PHONY: all build fmt lint test snap bench demo check

all: build

build:
	$(CARGO) build --release

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) clippy --all-targets --locked -- -D warnings

test:
	$(CARGO) test --locked

snap:
	INSTA_UPDATE=always $(CARGO) test --locked

bench:
	$(CARGO) bench --locked --bench keel

demo:
	./scripts/demo.sh

check:
	$(CARGO) fmt --all -- --check
	$(MAKE) lint
	$(MAKE) test
