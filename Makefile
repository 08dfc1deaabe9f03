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

# The deployable functions (crates functions/<name>, binaries floe-<name>).
FUNCTIONS := ingest poll commit backfill
# `make package PACKAGE_TARGET=<triple>` cross-builds (the target must be installed); empty: this
# machine. Packages go to $(DIST)/<function>/bootstrap.zip (and the bare bootstrap beside it).
PACKAGE_TARGET ?=
DIST ?= dist/local
BIN_DIR = $(CARGO_TARGET_DIR)/$(if $(PACKAGE_TARGET),$(PACKAGE_TARGET)/,)release
# Which ingest function deploy-fc deploys: ingest (OSS trigger) or ingest-mns (MNS topic trigger).
FC_INGEST ?= ingest

.PHONY: demo test soak simulate test-deps lint lint-templates build functions package package-fc package-lambda deploy-aws deploy-fc bench bench-functions bench-load clean-demo help

help:
	@echo "make demo       build floe and run the demo (local folder -> local Iceberg warehouse in ./demo)"
	@echo "make test       install test dependencies, then run every check and test"
	@echo "make simulate   the deterministic protocol simulation (SEEDS=100000 FROM=0; a failing seed replays by number)"
	@echo "make soak       many floe instances killed at random on the stand-ins (KILLS=1000 PROCESSES=4; default 30 kills)"
	@echo "make bench      run the benchmarks against the pyiceberg / pyodps baselines, and function start-up (not part of test)"
	@echo "make build      release binaries (the floe command and the four functions)"
	@echo "make functions  the four function binaries, each built on its own (only its own features)"
	@echo "make package    one bootstrap.zip per function in $(DIST)/<function>/ (PACKAGE_TARGET=<triple> to cross-build)"
	@echo "make deploy-aws build with sam (cargo-lambda) and deploy template.yaml: needs sam, cargo-lambda, AWS credentials"
	@echo "make deploy-fc  package for FC (x86_64 musl) and deploy s.yaml: needs s (Serverless Devs), Alibaba Cloud credentials"
	@echo "make bench-functions  start-up time and stripped size of each function binary"
	@echo "make bench-load       the ingest and commit functions under load, against pyiceberg run the same way"

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

lint: lint-templates
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	# The functions as packaged, each with only its own features (the workspace build unifies them).
	@for f in $(FUNCTIONS); do cargo clippy -p floe-$$f -- -D warnings || exit 1; done

# template.yaml through cfn-lint (with the SAM transform); s.yaml checked for FC 3.0's fields.
lint-templates: $(FLOE_VENV)/.installed
	$(FLOE_VENV)/bin/cfn-lint template.yaml
	$(FLOE_VENV)/bin/python tests/py/check_s_yaml.py s.yaml

test: test-deps lint
	cargo test --workspace

# The protocol simulation (shared/simulate): SEEDS seeds from FROM; CI runs a fixed block of them
# in `make test`. A failing seed replays with `floe-simulate --seed N --trace`.
SEEDS ?= 100000
FROM ?= 0
simulate:
	cargo run -p floe-simulate -- --seeds $(SEEDS) --from $(FROM)

# The multi-process soak (functions/floe/tests/soak.rs): PROCESSES `floe run --watch` instances and
# a floe-commit FC instance on one object-store checkpoint and lakana catalog, KILLS SIGKILLs at
# random moments, then every object version checked with pyiceberg. `make soak KILLS=1000`.
KILLS ?= 30
PROCESSES ?= 4
soak: test-deps
	cargo build --workspace --bins
	FLOE_SOAK_KILLS=$(KILLS) FLOE_SOAK_PROCESSES=$(PROCESSES) cargo test -p floe --test soak -- --nocapture

build: functions
	cargo build --release -p floe $(if $(PACKAGE_TARGET),--target $(PACKAGE_TARGET),)

# Each function is built on its own: built in one cargo run, their features would be unified and
# every function would link what only one of them uses (the poll function's queue clients).
functions:
	@for f in $(FUNCTIONS); do \
		cargo build --release -p floe-$$f $(if $(PACKAGE_TARGET),--target $(PACKAGE_TARGET),) || exit 1; \
	done

# One zip per function holding its binary renamed `bootstrap` (what Lambda's provided.al2023
# and FC's custom runtime start).
package: functions
	@for f in $(FUNCTIONS); do \
		mkdir -p $(DIST)/$$f && rm -f $(DIST)/$$f/bootstrap.zip && \
		cp $(BIN_DIR)/floe-$$f $(DIST)/$$f/bootstrap && chmod 755 $(DIST)/$$f/bootstrap && \
		(cd $(DIST)/$$f && zip -q -X bootstrap.zip bootstrap) && \
		echo "$(DIST)/$$f/bootstrap.zip ($$(stat -c %s $(DIST)/$$f/bootstrap.zip) bytes)"; \
	done

# FC 3.0 custom runtimes are x86_64 Debian 10 (glibc 2.28): a static musl build runs there.
# Needs `rustup target add x86_64-unknown-linux-musl` and musl-tools (musl-gcc).
package-fc:
	$(MAKE) package PACKAGE_TARGET=x86_64-unknown-linux-musl DIST=dist/fc

# Lambda zips for manual uploads (arm64, provided.al2023); `make deploy-aws` builds through
# `sam build` instead. Needs the aarch64 target and a linker for it (or use cargo-lambda).
package-lambda:
	$(MAKE) package PACKAGE_TARGET=aarch64-unknown-linux-gnu DIST=dist/lambda

# AWS: sam builds each function with cargo-lambda (BuildMethod rust-cargolambda, a beta
# feature of sam) and deploys template.yaml; the first run asks for the parameters.
deploy-aws:
	sam build --beta-features
	sam deploy --guided

# Alibaba Cloud: package for FC, then deploy s.yaml's functions with Serverless Devs
# (`s config add` first). Settings come from FLOE_REGION, FLOE_SOURCE_BUCKET, FLOE_STATE_BUCKET
# and FLOE_TABLE_BUCKET_ARN.
deploy-fc:
	@for v in FLOE_REGION FLOE_SOURCE_BUCKET FLOE_STATE_BUCKET FLOE_TABLE_BUCKET_ARN; do \
		if [ -z "$$(printenv $$v)" ]; then echo "set $$v (see README: deploying to Function Compute)"; exit 2; fi; \
	done
	$(MAKE) package-fc
	s $(FC_INGEST) deploy -y
	s poll deploy -y
	s commit deploy -y
	s backfill deploy -y

bench: test-deps
	$(FLOE_VENV)/bin/pip install --quiet -r bench/requirements.txt
	cargo build --release -p floe
	$(CARGO_TARGET_DIR)/release/floe bench --python $(FLOE_VENV)/bin/python
	$(CARGO_TARGET_DIR)/release/floe bench-commit-pass --s3s-fs $(FLOE_TOOLS)/bin/s3s-fs
	$(CARGO_TARGET_DIR)/release/floe bench-maintain --python $(FLOE_VENV)/bin/python
	bench/tunnel_encode.sh
	cargo run --quiet --release -p floe-maxcompute --example tunnel_formats
	bench/functions.sh
	$(MAKE) bench-load

# The deployed ingest and commit functions under load (FC and Lambda, the shipped templates'
# configuration) against pyiceberg run the same way: once as the stand-ins answer, once with a
# region's round trip added to every store and catalog request.
bench-load: test-deps functions
	cargo bench -p floe-testbed --bench functions_load -- --bin-dir $(CARGO_TARGET_DIR)/release
	cargo bench -p floe-testbed --bench functions_load -- --bin-dir $(CARGO_TARGET_DIR)/release --events 500 --store-rtt-ms 10

# Process start to first response of each function binary (Lambda and FC), and stripped sizes.
bench-functions:
	bench/functions.sh
