# berm top-level Makefile: guest SDK and fixtures. (The TypeScript side uses npm scripts.)
PYTHON ?= python3
SDK     = guest-sdk

.PHONY: help caps caps-check fixtures fixtures-check expected host-test rust-host-test scaffold-test nostub-test rebuild-test manifest-test docs-test examples

help:
	@echo "make fixtures        rebuild fixtures/build/*.elf and fixtures/manifest.json"
	@echo "make fixtures-check  rebuild into a temp dir, compare sha256, check every .berm.abi"
	@echo "make expected        recompute fixtures/expected.json and fixtures/rust/expected.json natively"
	@echo "make host-test       run the host tests of every example harness"
	@echo "make examples        rebuild examples/*.elf (then update examples/harnesses.toml, runtime.toml)"
	@echo "make caps            regenerate guest-sdk/include/berm_caps.h from guest-sdk/caps.txt"

caps:
	$(PYTHON) $(SDK)/tools/gen-caps.py $(SDK)/caps.txt $(SDK)/include/berm_caps.h

caps-check:
	$(PYTHON) $(SDK)/tools/gen-caps.py --check $(SDK)/caps.txt $(SDK)/include/berm_caps.h

fixtures: caps-check
	$(PYTHON) fixtures/fixtures.py build
	$(PYTHON) $(SDK)/tools/check-manifests.py fixtures/build/*.elf fixtures/rust/build/*.elf
	sh scripts/update-golden.sh   # the disassembler's golden listings follow the fixtures

fixtures-check: caps-check
	$(PYTHON) fixtures/fixtures.py check
	$(PYTHON) $(SDK)/tools/check-manifests.py fixtures/build/*.elf fixtures/rust/build/*.elf
	$(PYTHON) fixtures/expected.py --check
	$(PYTHON) fixtures/rust/expected.py --check

expected:
	$(PYTHON) fixtures/expected.py
	$(PYTHON) fixtures/rust/expected.py

host-test: caps-check
	@set -e; for d in $(SDK)/examples/*/; do \
	  echo "== host-test $$d"; $(MAKE) --no-print-directory -C $$d host-test; done
	$(MAKE) --no-print-directory scaffold-test nostub-test rebuild-test manifest-test docs-test rust-host-test

# The Rust SDK natively (cargo test against its stand-in host), ABI 1 and ABI 0, and the host
# tests of its notes example, with Debian's
# toolchain (CI installs rustc-web and cargo-web).
RUST_CARGO ?= /usr/bin/cargo
RUST_RUSTC ?= /usr/bin/rustc
# Without the toolchain it is skipped with a message, except under CI (CI=true), where it fails.
rust-host-test:
	@if [ ! -x $(RUST_CARGO) ] && [ -z "$$CI" ]; then \
	  echo "rust-host-test: skipped: $(RUST_CARGO) is missing (apt-get install rustc-web cargo-web)"; exit 0; fi; \
	set -e; cd $(SDK)/rust; \
	RUSTC=$(RUST_RUSTC) $(RUST_CARGO) test --offline -q; \
	RUSTC=$(RUST_RUSTC) $(RUST_CARGO) test --offline -q --features abi0; \
	cd examples/notes && RUSTC=$(RUST_RUSTC) CARGO_TARGET_DIR=../../target $(RUST_CARGO) test --offline -q

# The example harnesses declared by examples/harnesses.toml (gcc -O2, reproducible).
EXAMPLE_HARNESSES = os fetch probe ticker wakes remind wsecho
examples: caps-check
	@set -e; for h in $(EXAMPLE_HARNESSES); do \
	  $(MAKE) --no-print-directory -s -B -C $(SDK)/examples/$$h BERM_CC=gcc OPT=-O2 all; \
	  cp $(SDK)/examples/$$h/build/$$h.elf examples/$$h.elf; done
	$(PYTHON) $(SDK)/tools/check-manifests.py $(EXAMPLE_HARNESSES:%=examples/%.elf)
	@cd examples && sha256sum $(EXAMPLE_HARNESSES:%=%.elf)

# A capability with no stand-in must abort the host test, naming the capability.
nostub-test:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	  gcc -O1 -DBERM_HOST -I$(SDK)/include -I$(SDK)/host -o $$tmp/t $(SDK)/examples/notes/notes.c \
	    $(SDK)/host/test_nostub.c $(SDK)/src/berm_rt.c $(SDK)/host/berm_host.c; \
	  if $$tmp/t >$$tmp/out 2>&1; then echo "nostub-test: did not abort"; exit 1; fi; \
	  grep -q 'capability berm.fs.read has no stand-in' $$tmp/out || { cat $$tmp/out; exit 1; }; \
	  echo "nostub-test: aborts naming berm.fs.read (ok)"

# Changing the compiler (or OPT) rebuilds the ELF; the same configuration again does nothing.
rebuild-test:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; d=$$tmp/demo; elf=$$d/build/demo.elf; \
	  scripts/new-harness $$d >/dev/null; \
	  $(MAKE) --no-print-directory -s -C $$d all; \
	  ! grep -q clang $$elf || { echo "rebuild-test: the gcc build names clang"; exit 1; }; \
	  $(MAKE) --no-print-directory -s -C $$d all BERM_CC=clang; \
	  grep -q clang $$elf || { echo "rebuild-test: BERM_CC=clang after gcc did not rebuild"; exit 1; }; \
	  t1=$$(stat -c %y $$elf); sleep 0.05; \
	  $(MAKE) --no-print-directory -s -C $$d all BERM_CC=clang; \
	  test "$$(stat -c %y $$elf)" = "$$t1" || { echo "rebuild-test: the same configuration rebuilt"; exit 1; }; \
	  $(MAKE) --no-print-directory -s -C $$d all BERM_CC=clang OPT=-Os; \
	  test "$$(stat -c %y $$elf)" != "$$t1" || { echo "rebuild-test: OPT=-Os did not rebuild"; exit 1; }; \
	  echo "rebuild-test: gcc, clang, clang again, -Os: rebuilt exactly when the configuration changed (ok)"

# Every SDK name the guest documentation mentions exists; the README's wake example builds and passes.
docs-test:
	@$(PYTHON) $(SDK)/tools/check-readme.py $(SDK)/README.md docs/wakes.md
	@$(PYTHON) $(SDK)/tools/test-readme-example.py $(SDK)/README.md

# berm-manifest.py refuses a tool whose parameters are not a valid JSON Schema, at build time.
manifest-test:
	@$(PYTHON) $(SDK)/tools/test-manifest-schema.py .
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; d=$$tmp/demo; \
	  scripts/new-harness $$d >/dev/null; \
	  sed -i 's/{\\"type\\":\\"string\\"}/{\\"type\\":\\"strng\\"}/' $$d/demo.c; \
	  grep -q strng $$d/demo.c || { echo "manifest-test: could not break the schema"; exit 1; }; \
	  if $(MAKE) --no-print-directory -s -C $$d all >$$tmp/out 2>&1; then echo "manifest-test: built"; exit 1; fi; \
	  grep -q 'tool greet: parameters is not a valid JSON Schema.*#/properties/name/type' $$tmp/out \
	    || { cat $$tmp/out; exit 1; }; \
	  test ! -e $$d/build/demo.elf; \
	  echo "manifest-test: a harness with an invalid parameters schema does not build (ok)"

# The scaffold must produce a harness that builds for the guest and passes its host test.
scaffold-test:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	  scripts/new-harness $$tmp/demo >/dev/null; \
	  $(MAKE) --no-print-directory -s -C $$tmp/demo all host-test; \
	  $(PYTHON) $(SDK)/tools/check-manifests.py $$tmp/demo/build/demo.elf

# The TypeScript side (tests, lint, benchmarks).
include mk/node.mk

include mk/conformance.mk
include mk/bench.mk
