# berm guest SDK: Makefile include. A harness Makefile needs only:
#
#   HARNESS = mytool            # output: build/mytool.elf
#   SRCS    = mytool.c          # guest sources (also compiled natively for host tests)
#   include path/to/guest-sdk/berm.mk
#
# Optional: BERM_CC=clang|gcc (default gcc), OPT=-O2, BERM_ABI=1|0, BERM_MODEL=medany|medlow,
#           HOST_TESTS (default: test_*.c), BUILD (default: build),
#           BERM_TARGET=riscv64|wasm32 (default riscv64; wasm32 builds build/<name>.wasm with
#           Debian's clang --target=wasm32 and wasm-ld, the SDK's small libc, ABI 1; docs/wasm.md).
# Targets:  all (the ELF, or the Wasm module), host-test (native build + run of the host tests), clean.

BERM_SDK := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))

BERM_CC    ?= gcc
OPT        ?= -O2
BERM_ABI   ?= 1
BERM_MODEL ?= medany
BUILD      ?= build
HOST_TESTS ?= $(wildcard test_*.c)
HOST_CC    ?= gcc
PYTHON     ?= python3

PICOLIBC   ?= /usr/lib/picolibc/riscv64-unknown-elf
BERM_RT     = $(BERM_SDK)/src/berm_rt.c

# Flags shared by both compilers. -ffile-prefix-map and no -g keep builds reproducible.
BERM_TARGET_CFLAGS = -march=rv64imac -mabi=lp64 -mcmodel=$(BERM_MODEL) -ffreestanding \
  -fno-pic -fno-pie -fno-plt -ffunction-sections -fdata-sections -fno-common \
  -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-stack-protector \
  -ftls-model=local-exec -ffile-prefix-map=$(CURDIR)/= -ffile-prefix-map=$(BERM_SDK)/=guest-sdk/ \
  -I$(BERM_SDK)/include -DBERM_ABI=$(BERM_ABI) -Wall -Wextra -Wno-unused-parameter
BERM_TARGET_LDFLAGS = -static -Wl,--emit-relocs -Wl,--gc-sections -T $(BERM_SDK)/berm.ld \
  -Wl,-z,max-page-size=4096 -Wl,--build-id=none -Wl,--strip-debug

ifeq ($(BERM_CC),clang)
BERM_CLANG    ?= clang
BERM_XCC       = $(BERM_CLANG) --target=riscv64-unknown-elf -mno-relax -nostdinc \
                 -isystem $(shell $(BERM_CLANG) -print-resource-dir)/include -isystem $(PICOLIBC)/include
BERM_LIBGCC   ?= $(shell riscv64-unknown-elf-gcc -march=rv64imac -mabi=lp64 -print-libgcc-file-name)
BERM_XLDFLAGS  = -fuse-ld=lld -nostdlib $(BERM_TARGET_LDFLAGS)
BERM_XLIBS     = -L$(PICOLIBC)/lib/rv64imac/lp64 -Wl,--start-group -lc $(BERM_LIBGCC) -Wl,--end-group
BERM_OBJCOPY  ?= llvm-objcopy
else ifeq ($(BERM_CC),gcc)
BERM_XCC       = riscv64-unknown-elf-gcc --specs=picolibc.specs
BERM_XLDFLAGS  = -nostartfiles -no-pie $(BERM_TARGET_LDFLAGS)
BERM_XLIBS     =
BERM_OBJCOPY  ?= riscv64-unknown-elf-objcopy
else
$(error BERM_CC must be clang or gcc)
endif

BERM_TARGET ?= riscv64
ifeq ($(BERM_TARGET),wasm32)
BERM_ELF = $(BUILD)/$(HARNESS).wasm
else ifeq ($(BERM_TARGET),riscv64)
BERM_ELF = $(BUILD)/$(HARNESS).elf
else
$(error BERM_TARGET must be riscv64 or wasm32)
endif

# wasm32: clang and wasm-ld (Debian's clang/lld 14), the SDK's libc subset, every record kept
# (--no-gc-sections: the berm_tools data segment is referenced by nothing), a 64 KiB stack. Each
# source is compiled with -c and wasm-ld is run directly: linking through clang would run any
# wasm-opt found in PATH (npm's binaryen puts one in node_modules/.bin), which drops the records
# and the name section and makes the output depend on PATH.
BERM_WASM_CLANG ?= clang
BERM_WASM_CFLAGS = --target=wasm32 -ffreestanding -nostdlib -I$(BERM_SDK)/wasm32/include -I$(BERM_SDK)/include \
  -ffile-prefix-map=$(CURDIR)/= -ffile-prefix-map=$(BERM_SDK)/=guest-sdk/ -DBERM_ABI=1 \
  -Wall -Wextra -Wno-unused-parameter
BERM_WASM_LD ?= wasm-ld
BERM_WASM_LDFLAGS = --no-entry --no-gc-sections -z stack-size=65536 --strip-debug
BERM_WASM_LIBC = $(BERM_SDK)/wasm32/berm_libc.c

# The build configuration. Its stamp file changes only when the configuration does, and both the
# ELF and the host test depend on it, so `make BERM_CC=clang` after a gcc build (or another OPT,
# ABI or code model) rebuilds instead of reporting the old ELF as up to date.
BERM_CONFIG = target=$(BERM_TARGET) cc=$(BERM_CC) opt=$(OPT) abi=$(BERM_ABI) model=$(BERM_MODEL) host_cc=$(HOST_CC)
BERM_STAMP  = $(BUILD)/.config-$(HARNESS)

# Compile one ELF: $(call berm_link,out.elf,sources,extra cflags)
ifeq ($(BERM_TARGET),wasm32)
define berm_link
	@rm -rf $(1).objs && mkdir -p $(1).objs
	@set -e; i=0; for s in $(2) $(BERM_RT) $(BERM_WASM_LIBC); do i=$$((i+1)); \
	  $(BERM_WASM_CLANG) $(BERM_WASM_CFLAGS) $(OPT) $(3) -c -o $(1).objs/$$i.o $$s; done
	$(BERM_WASM_LD) $(BERM_WASM_LDFLAGS) -o $(1).tmp $$(ls $(1).objs/*.o | sort -V)
	@rm -rf $(1).objs
	$(PYTHON) $(BERM_SDK)/tools/berm-manifest.py --abi 1 $(1).tmp $(1) || { rm -f $(1).tmp; exit 1; }
	@rm -f $(1).tmp
endef
else
define berm_link
	@mkdir -p $(dir $(1))
	$(BERM_XCC) $(BERM_TARGET_CFLAGS) $(OPT) $(3) $(BERM_XLDFLAGS) -o $(1).tmp $(2) $(BERM_RT) $(BERM_XLIBS)
	$(PYTHON) $(BERM_SDK)/tools/berm-manifest.py --abi $(BERM_ABI) --objcopy $(BERM_OBJCOPY) $(1).tmp $(1) || { rm -f $(1).tmp; exit 1; }
	@rm -f $(1).tmp
endef
endif

.PHONY: all host-test clean berm-config-force
all: $(BERM_ELF)

$(BERM_STAMP): berm-config-force
	@mkdir -p $(BUILD)
	@if [ "$$(cat $@ 2>/dev/null)" != "$(BERM_CONFIG)" ]; then echo "$(BERM_CONFIG)" > $@; fi

BERM_HEADERS = $(wildcard $(BERM_SDK)/include/*.h)

$(BERM_ELF): $(SRCS) $(BERM_RT) $(BERM_HEADERS) $(BERM_SDK)/berm.ld $(BERM_SDK)/tools/berm-manifest.py $(BERM_STAMP) $(wildcard $(BERM_SDK)/wasm32/*.c $(BERM_SDK)/wasm32/include/*.h)
	$(call berm_link,$@,$(SRCS))

# Host tests: the same sources, compiled natively against the stand-in host.
BERM_HOST_CFLAGS = -O1 -g -DBERM_HOST -DBERM_ABI=$(BERM_ABI) -I$(BERM_SDK)/include -I$(BERM_SDK)/host \
  -Wall -Wextra -Wno-unused-parameter -fno-common

$(BUILD)/host-test: $(SRCS) $(HOST_TESTS) $(BERM_RT) $(BERM_SDK)/host/berm_host.c $(BERM_SDK)/host/berm_host.h $(BERM_HEADERS) $(BERM_STAMP)
	@mkdir -p $(BUILD)
	$(HOST_CC) $(BERM_HOST_CFLAGS) -o $@ $(SRCS) $(HOST_TESTS) $(BERM_RT) $(BERM_SDK)/host/berm_host.c

host-test: $(BUILD)/host-test
	$(if $(filter /%,$(BUILD)),,./)$(BUILD)/host-test

clean:
	rm -rf $(BUILD)
