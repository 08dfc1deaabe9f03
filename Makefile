# floe — the two commands a newcomer needs: `make demo` and `make test`.
#
# Caches live outside the clone (override with FLOE_CACHE): the cargo target directory, the
# Python venv of test stand-ins and readers, and the s3s-fs binary.

FLOE_CACHE ?= $(HOME)/.cache/floe
export CARGO_TARGET_DIR ?= $(FLOE_CACHE)/target
export FLOE_VENV ?= $(FLOE_CACHE)/venv
export FLOE_TOOLS ?= $(FLOE_CACHE)/tools
PYTHON ?= python3
S3S_FS_VERSION := 0.14.1

.PHONY: demo test test-deps lint build bench clean-demo help

help:
	@echo "make demo       build floe and run the demo (local folder -> local Iceberg warehouse in ./demo)"
	@echo "make test       install test dependencies, then run every check and test"
	@echo "make bench      run the benchmarks against the pyiceberg / pyodps baselines (not part of test)"
	@echo "make build      release binaries"

demo:
	cargo run -p floe -- demo

clean-demo:
	rm -rf demo

# Everything the tests need besides the Rust toolchain: a venv with pyiceberg, moto, lakana-server,
# and s3s-fs (built once, about 10 minutes on 2 cores, then reused).
test-deps: $(FLOE_VENV)/.installed $(FLOE_TOOLS)/bin/s3s-fs

$(FLOE_VENV)/.installed: tests/requirements.txt
	$(PYTHON) -m venv $(FLOE_VENV)
	$(FLOE_VENV)/bin/pip install --quiet --upgrade pip
	$(FLOE_VENV)/bin/pip install --quiet -r tests/requirements.txt
	touch $@

$(FLOE_TOOLS)/bin/s3s-fs:
	cargo install s3s-fs@$(S3S_FS_VERSION) --features binary --locked --root $(FLOE_TOOLS)

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

test: test-deps lint
	cargo test --workspace

build:
	cargo build --release --workspace --bins

bench: test-deps
	$(FLOE_VENV)/bin/pip install --quiet -r bench/requirements.txt
	cargo build --release -p floe
	$(CARGO_TARGET_DIR)/release/floe bench --python $(FLOE_VENV)/bin/python
	bench/tunnel_encode.sh
