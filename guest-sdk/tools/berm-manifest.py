#!/usr/bin/env python3
"""Post-link step: compose the .berm.abi manifest of a harness ELF and write it in place.

Reads the records that BERM_TOOL / BERM_USAGE / BERM_DEP / BERM_ON_WAKE / BERM_ON_NOTIFY put into the allocated section
`berm_tools` (kind, a, b, c, fn: five little-endian u64 each), follows their string pointers
through the section table, and adds a non-allocated section `.berm.abi` holding exactly one JSON
object:
  ABI 1: {"abi_version":1,"usage":...,"deps":[...],"tools":[{"name","description","parameters"}]}
  ABI 0: {"abi_version":0,"usage":...,"tools":[...]}
Usage: berm-manifest.py --abi N --objcopy OBJCOPY in.elf out.elf
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile


class Elf:
    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise SystemExit("berm-manifest: not a little-endian ELF64 file")
        self.data = data
        (self.shoff,) = struct.unpack_from("<Q", data, 0x28)
        self.shentsize, self.shnum, self.shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        self.sections = []
        for i in range(self.shnum):
            off = self.shoff + i * self.shentsize
            name, typ, flags, addr, offset, size = struct.unpack_from("<IIQQQQ", data, off)
            self.sections.append(dict(name_off=name, type=typ, flags=flags, addr=addr, offset=offset, size=size))
        strtab = self.sections[self.shstrndx]
        for s in self.sections:
            s["name"] = self.cstr_at(strtab["offset"] + s["name_off"])

    def cstr_at(self, off: int) -> str:
        end = self.data.index(b"\0", off)
        return self.data[off:end].decode("utf-8")

    def section(self, name):
        for s in self.sections:
            if s["name"] == name:
                return s
        return None

    def string_at_vaddr(self, addr: int) -> str:
        for s in self.sections:
            if s["flags"] & 2 and s["type"] != 8 and s["addr"] <= addr < s["addr"] + s["size"]:
                return self.cstr_at(s["offset"] + addr - s["addr"])
        raise SystemExit(f"berm-manifest: string pointer {addr:#x} is outside every loaded section")


def compose(elf: Elf, abi: int) -> str:
    sec = elf.section("berm_tools")
    tools, deps, usage, entries = [], [], [], []
    if sec is not None:
        if sec["size"] % 40:
            raise SystemExit("berm-manifest: section berm_tools is not a whole number of records")
        for i in range(0, sec["size"], 40):
            kind, a, b, c, fn = struct.unpack_from("<QQQQQ", elf.data, sec["offset"] + i)
            if kind == 1:
                name = elf.string_at_vaddr(a)
                schema_text = elf.string_at_vaddr(c) if c else ""
                try:
                    schema = json.loads(schema_text) if schema_text.strip() else {"type": "object"}
                except json.JSONDecodeError as e:
                    raise SystemExit(f"berm-manifest: tool {name}: parameters is not valid JSON: {e}")
                if not isinstance(schema, dict):
                    raise SystemExit(f"berm-manifest: tool {name}: parameters must be a JSON object")
                tools.append({"name": name, "description": elf.string_at_vaddr(b), "parameters": schema})
            elif kind == 2:
                usage.append(elf.string_at_vaddr(a))
            elif kind == 3:
                deps.append(elf.string_at_vaddr(a))
            elif kind == 4:
                # An entry export (on_wake / on_notify): the record only keeps it linked; the
                # export table is the registration, so the manifest does not list it.
                entry = elf.string_at_vaddr(a)
                if entry not in ("on_wake", "on_notify"):
                    raise SystemExit(f"berm-manifest: unknown entry {entry!r} (on_wake or on_notify)")
                if entry in entries:
                    raise SystemExit(f"berm-manifest: {entry} defined twice")
                entries.append(entry)
            else:
                raise SystemExit(f"berm-manifest: unknown record kind {kind} at offset {i}")
    tools.sort(key=lambda t: t["name"])  # record order differs between compilers; names are unique
    names = [t["name"] for t in tools]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"berm-manifest: duplicate tool names: {sorted(dup)}")
    if len(usage) > 1:
        raise SystemExit("berm-manifest: BERM_USAGE given more than once")
    manifest = {"abi_version": abi, "usage": usage[0] if usage else ""}
    if abi >= 1:
        manifest["deps"] = deps
    elif deps:
        raise SystemExit("berm-manifest: BERM_DEP needs ABI 1")
    manifest["tools"] = tools
    return json.dumps(manifest, ensure_ascii=False, separators=(",", ":"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--abi", type=int, default=1)
    ap.add_argument("--objcopy", default="llvm-objcopy")
    ap.add_argument("input")
    ap.add_argument("output")
    args = ap.parse_args()
    with open(args.input, "rb") as f:
        elf = Elf(f.read())
    if elf.section(".berm.abi") is not None:
        raise SystemExit("berm-manifest: input already has .berm.abi")
    text = compose(elf, args.abi)
    fd, tmp = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
        subprocess.run(
            [args.objcopy, "--add-section", f".berm.abi={tmp}", "--set-section-flags", ".berm.abi=readonly",
             args.input, args.output],
            check=True,
        )
    finally:
        os.unlink(tmp)


if __name__ == "__main__":
    main()
