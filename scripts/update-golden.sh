#!/bin/sh
# Regenerates every golden listing under test/golden/ with LLVM 14 (clang, ld.lld, llvm-objdump).
# Tests compare berm's disassembler against these files, so they must come from llvm-objdump,
# never from berm itself. Run after changing the ISA table (src/riscv/isa.ts), conformance/gen-*.ts or the fixtures.
set -eu
cd "$(dirname "$0")/.."
OBJDUMP="llvm-objdump -d -M no-aliases --no-show-raw-insn --mattr=+m,+a,+c"
mkdir -p test/golden/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

node --import ./scripts/ts/register.mjs conformance/gen-all-encodings.ts >"$tmp/all-encodings.s"
clang --target=riscv64 -march=rv64imac -mno-relax -c "$tmp/all-encodings.s" -o "$tmp/all-encodings.o"
ld.lld --emit-relocs -Ttext=0x11000 -e _start "$tmp/all-encodings.o" -o test/golden/all-encodings.elf
# the file-name line would embed the temporary path: drop everything before the listing
$OBJDUMP test/golden/all-encodings.elf | sed -n '/^Disassembly/,$p' >test/golden/all-encodings.txt

# Samples of every ISA-table entry (conformance/gen-table.ts), as raw data.
node --import ./scripts/ts/register.mjs conformance/gen-table.ts >"$tmp/isa-table.s"
clang --target=riscv64 -march=rv64imac -mno-relax -c "$tmp/isa-table.s" -o "$tmp/isa-table.o"
ld.lld --emit-relocs -Ttext=0x11000 -e _start "$tmp/isa-table.o" -o test/golden/isa-table.elf
$OBJDUMP test/golden/isa-table.elf | sed -n '/^Disassembly/,$p' >test/golden/isa-table.txt

# Fixture ELFs built from the guest SDK, when present.
for elf in fixtures/build/*.elf; do
  [ -e "$elf" ] || continue
  name=$(basename "$elf" .elf)
  $OBJDUMP "$elf" | sed -n '/^Disassembly/,$p' >"test/golden/fixtures/$name.txt"
done

# test/data: the reader's real-toolchain ELFs.
if [ -f test/data/Makefile ]; then make -s -C test/data; fi
