#!/usr/bin/env bash
# Record encoding throughput: floe-tunnel-codec vs pyodps's C writer on the same rows.
# Usage: bench/tunnel_encode.sh [ROWS]   (not part of CI; target: floe at least 5x pyodps)
# Env: CARGO_TARGET_DIR (default ~/.cache/floe/target), PYODPS_PYTHON (a python with pyodps).
set -euo pipefail
rows=${1:-200000}
root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/floe/target}
py=${PYODPS_PYTHON:-${FLOE_VENV:-$HOME/.cache/floe/venv}/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$root" && cargo build --quiet --release -p floe-tunnel-codec --example encode_bench)
"$CARGO_TARGET_DIR/release/examples/encode_bench" "$rows" "$tmp/rust.bin" | tee "$tmp/rust.txt"
"$py" "$root/bench/tunnel_encode_pyodps.py" "$rows" "$tmp/pyodps.bin" | tee "$tmp/pyodps.txt"

if cmp -s "$tmp/rust.bin" "$tmp/pyodps.bin"; then
    echo "blocks identical ($(stat -c %s "$tmp/rust.bin") bytes)"
else
    echo "blocks differ:" >&2
    cmp "$tmp/rust.bin" "$tmp/pyodps.bin" >&2 || true
    exit 1
fi
rust=$(sed -n 's/^records_per_sec=//p' "$tmp/rust.txt")
pyo=$(sed -n 's/^records_per_sec=//p' "$tmp/pyodps.txt")
awk -v r="$rust" -v p="$pyo" 'BEGIN { printf "floe %d records/s, pyodps %d records/s, ratio %.1fx\n", r, p, r / p }'
