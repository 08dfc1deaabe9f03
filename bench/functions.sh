#!/usr/bin/env bash
# The function binaries' start-up: process start to first response, under a Lambda Runtime API
# stand-in and as an FC custom runtime server, plus each binary's stripped size.
# Usage: bench/functions.sh [RUNS]   (not part of CI; target: under 20 ms to the first response)
# Env: CARGO_TARGET_DIR (default ~/.cache/floe/target).
set -euo pipefail
runs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/floe/target}

# One function per cargo run, as `make package` builds them: built together, their features
# would be unified and each binary would carry the others' parts.
for f in ingest poll commit backfill; do
  (cd "$root" && cargo build --quiet --release -p "floe-$f")
done
python3 "$root/bench/functions_startup.py" --bin-dir "$CARGO_TARGET_DIR/release" --runs "$runs"
