# keel: developer commands. `make check` is what CI runs.
CARGO ?= cargo
export INSTA_UPDATE ?= no

.PHONY: all build fmt lint test snap bench demo check chaos

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

# 300 kill -9s at random points of tool runs, each followed by a resume (make check runs 30).
chaos:
	KEEL_CHAOS_KILLS=300 $(CARGO) test --locked --test all chaos -- --nocapture

check:
	$(CARGO) fmt --all -- --check
	$(MAKE) lint
	$(MAKE) test
