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

# Tests whose tool is missing here (bubblewrap, nats-server, Chromium, sshd, the npm SDKs, man)
# skip themselves and say so in target/skipped.txt, listed at the end: never a silent pass.
test:
	@mkdir -p target && rm -f target/skipped.txt
	KEEL_SKIPPED=$(CURDIR)/target/skipped.txt $(CARGO) test --locked
	@if [ -s target/skipped.txt ]; then \
		echo "SKIPPED (install what they need; .ci/run does):"; \
		sort -u target/skipped.txt | sed 's/^/  - /'; \
	else echo "no test was skipped"; fi

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
