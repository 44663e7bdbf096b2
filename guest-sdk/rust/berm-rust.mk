# berm guest SDK for Rust: Makefile include. A harness Makefile needs only:
#
#   HARNESS = mytool            # the crate's binary name; output: build/mytool.elf
#   include path/to/guest-sdk/rust/berm-rust.mk
#
# Targets: all (the ELF: cargo build-std for riscv64imac-unknown-none-elf, static, --emit-relocs,
#          the SDK's linker script), test (cargo test natively: the host tests), clean.
# Options: OPT=2|s|z|0|1|3 (opt-level, default 2), BERM_ABI=1|0, BUILD=build,
#          CARGO_TARGET_DIR (default: target; share one across harnesses to build core/alloc once),
#          BERM_CARGO / BERM_RUSTC (default: Debian's /usr/bin/cargo and /usr/bin/rustc),
#          BERM_LINKER (default ld.lld), BERM_VENDOR=debian|none (default debian when Debian's crate
#          registry is installed: crates come from /usr/share/cargo/registry, offline).

BERM_RUST_SDK := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))

OPT          ?= 2
BERM_ABI     ?= 1
BUILD        ?= build
CARGO_TARGET_DIR ?= target
BERM_CARGO   ?= /usr/bin/cargo
BERM_RUSTC   ?= /usr/bin/rustc
BERM_LINKER  ?= ld.lld
BERM_TRIPLE   = riscv64imac-unknown-none-elf
BERM_VENDOR  ?= $(if $(wildcard /usr/share/cargo/registry),debian,none)
BERM_VENDOR_DIR ?= $(BERM_RUST_SDK)/.vendor

ifeq ($(BERM_VENDOR),debian)
BERM_SOURCE_FLAGS = --offline --config 'source.crates-io.replace-with="berm-debian"' \
  --config 'source.berm-debian.directory="$(BERM_VENDOR_DIR)"'
BERM_VENDOR_DEP = $(BERM_VENDOR_DIR)
else
BERM_SOURCE_FLAGS =
BERM_VENDOR_DEP =
endif

# opt-level: an integer (0-3) or a string ("s", "z") in cargo's config syntax.
BERM_OPT_VALUE = $(if $(filter 0 1 2 3,$(OPT)),$(OPT),"$(OPT)")

BERM_FEATURES = $(if $(filter 0,$(BERM_ABI)),--features berm/abi0,)

# The flags are the same for every harness of a checkout (the crate's own paths are already
# relative), so harnesses sharing CARGO_TARGET_DIR share one build of core and alloc.
# Static, non-PIC, no linker relaxation (lld cannot relax RISC-V; berm's translator reads the
# relocations --emit-relocs keeps), the SDK's linker script (berm-rust.ld INCLUDEs ../berm.ld).
BERM_RUSTFLAGS = -C relocation-model=static -C code-model=medium -C target-feature=-relax \
  -C link-arg=-Tberm-rust.ld -C link-arg=--emit-relocs -C link-arg=--gc-sections \
  -C link-arg=-zmax-page-size=4096 -C link-arg=--build-id=none -C link-arg=--strip-debug \
  -C debuginfo=0 --remap-path-prefix=$(BERM_RUST_SDK)/=guest-sdk/rust/

BERM_CARGO_ENV = RUSTC=$(BERM_RUSTC) RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) \
  CARGO_TARGET_RISCV64IMAC_UNKNOWN_NONE_ELF_LINKER=$(BERM_LINKER) \
  CARGO_TARGET_RISCV64IMAC_UNKNOWN_NONE_ELF_RUSTFLAGS="$(BERM_RUSTFLAGS)"

BERM_ELF = $(BUILD)/$(HARNESS).elf

.PHONY: all test clean $(BERM_ELF)
all: $(BERM_ELF)

$(BERM_VENDOR_DIR):
	@sh $(BERM_RUST_SDK)/tools/vendor.sh $@

# Cargo decides what is stale; the copy happens only when the ELF changed.
$(BERM_ELF): $(BERM_VENDOR_DEP)
	$(BERM_CARGO_ENV) $(BERM_CARGO) build $(BERM_SOURCE_FLAGS) --release --target $(BERM_TRIPLE) \
	  -Z build-std=core,alloc $(BERM_FEATURES) --config 'profile.release.opt-level=$(BERM_OPT_VALUE)' \
	  --config 'profile.release.panic="abort"' --config 'profile.release.debug=0'
	@mkdir -p $(BUILD)
	@cmp -s $(CARGO_TARGET_DIR)/$(BERM_TRIPLE)/release/$(HARNESS) $@ || \
	  cp $(CARGO_TARGET_DIR)/$(BERM_TRIPLE)/release/$(HARNESS) $@

# Host tests: the same crate, built natively against the stand-in host (berm::host).
test: $(BERM_VENDOR_DEP)
	RUSTC=$(BERM_RUSTC) CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) $(BERM_CARGO) test $(BERM_SOURCE_FLAGS) $(BERM_FEATURES)

clean:
	rm -rf $(BUILD) $(CARGO_TARGET_DIR)
