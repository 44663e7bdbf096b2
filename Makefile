# berm top-level Makefile: guest SDK and fixtures. (The TypeScript side uses npm scripts.)
PYTHON ?= python3
SDK     = guest-sdk

.PHONY: help caps caps-check fixtures fixtures-check expected host-test scaffold-test nostub-test examples

help:
	@echo "make fixtures        rebuild fixtures/build/*.elf and fixtures/manifest.json"
	@echo "make fixtures-check  rebuild into a temp dir, compare sha256, check every .berm.abi"
	@echo "make expected        recompute fixtures/expected.json natively (gcc, stand-in host)"
	@echo "make host-test       run the host tests of every example harness"
	@echo "make examples        rebuild examples/*.elf (then update examples/harnesses.toml, runtime.toml)"
	@echo "make caps            regenerate guest-sdk/include/berm_caps.h from guest-sdk/caps.txt"

caps:
	$(PYTHON) $(SDK)/tools/gen-caps.py $(SDK)/caps.txt $(SDK)/include/berm_caps.h

caps-check:
	$(PYTHON) $(SDK)/tools/gen-caps.py --check $(SDK)/caps.txt $(SDK)/include/berm_caps.h

fixtures: caps-check
	$(PYTHON) fixtures/fixtures.py build
	$(PYTHON) $(SDK)/tools/check-manifests.py fixtures/build/*.elf
	sh scripts/update-golden.sh   # the disassembler's golden listings follow the fixtures

fixtures-check: caps-check
	$(PYTHON) fixtures/fixtures.py check
	$(PYTHON) $(SDK)/tools/check-manifests.py fixtures/build/*.elf
	$(PYTHON) fixtures/expected.py --check

expected:
	$(PYTHON) fixtures/expected.py

host-test: caps-check
	@set -e; for d in $(SDK)/examples/*/; do \
	  echo "== host-test $$d"; $(MAKE) --no-print-directory -C $$d host-test; done
	$(MAKE) --no-print-directory scaffold-test nostub-test

# The example harnesses declared by examples/harnesses.toml (gcc -O2, reproducible).
EXAMPLE_HARNESSES = os fetch probe ticker wakes
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
