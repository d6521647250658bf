#!/usr/bin/env bash
# `make demo`: keel in print mode on the scripted provider, offline, inside a scratch copy of
# fixtures/workspaces/demo. The agent reads a file, edits it, runs it, and answers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Cargo's progress stays on stderr: a fresh clone builds for minutes, and silence looks stuck.
cargo build --manifest-path "$root/Cargo.toml" --bin keel
scratch="$(mktemp -d "${TMPDIR:-/tmp}/keel-demo.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
cp -R "$root/fixtures/workspaces/demo/." "$scratch/"
cd "$scratch"
echo "\$ keel -p 'Make greet.sh greet keel instead of the world, then run it.'   (in $scratch)" >&2
KEEL_HOME="$scratch/.keel-home" "$root/target/debug/keel" -p </dev/null \
  --provider scripted --script "$root/fixtures/providers/demo.json" \
  "Make greet.sh greet keel instead of the world, then run it."
status=$?
echo "--- greet.sh after the run:" >&2
cat greet.sh >&2
echo "--- session file:" >&2
ls "$scratch"/.keel-home/sessions/*/ >&2
exit $status
