#!/usr/bin/env bash
# The function binaries' start-up: process start to first response, under a Lambda Runtime API
# stand-in and as an FC custom runtime server, plus each binary's stripped size.
# Usage: bench/functions.sh [RUNS]   (not part of CI; target: under 20 ms to the first response)
# Env: CARGO_TARGET_DIR (default ~/.cache/floe/target).
set -euo pipefail
runs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/floe/target}

(cd "$root" && cargo build --quiet --release -p floe-ingest -p floe-poll -p floe-commit -p floe-backfill)
python3 "$root/bench/functions_startup.py" --bin-dir "$CARGO_TARGET_DIR/release" --runs "$runs"
