#!/usr/bin/env python3
"""Check harness ELFs: .berm.abi is one valid JSON object with the expected shape, every declared
tool has its berm_tool_<name> export and every berm_tool_ export is declared, the file is a static
RV64 executable with relocations kept (--emit-relocs), and the TLS block the SDK uses in place
(__berm_tls_base) is the PT_TLS segment start and lies inside a PT_LOAD.

Usage: check-manifests.py ELF...
"""
import json
import struct
import sys

SHT_SYMTAB, SHT_RELA, SHT_NOBITS = 2, 4, 8
PT_LOAD, PT_TLS = 1, 7


def check(path):
    errs = []
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return ["not an ELF64 little-endian file"]
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    if e_type != 2:
        errs.append(f"e_type {e_type} is not ET_EXEC")
    if e_machine != 243:
        errs.append(f"e_machine {e_machine} is not RISC-V")
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
    secs = []
    for i in range(e_shnum):
        name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
        secs.append(dict(name=name, type=typ, flags=flags, addr=addr, off=off, size=size, link=link))
    shstr = secs[e_shstrndx]

    def cstr(off):
        return data[off:data.index(b"\0", off)].decode()

    for s in secs:
        s["name"] = cstr(shstr["off"] + s["name"])
    phdrs = [struct.unpack_from("<IIQQQQQQ", data, e_phoff + i * e_phentsize) for i in range(e_phnum)]
    if any(p[0] == 3 for p in phdrs):
        errs.append("has PT_INTERP (not static)")
    if not any(s["type"] == SHT_RELA and s["name"].startswith(".rela") and s["name"] != ".rela.dyn" for s in secs):
        errs.append("no .rela.* sections: link with -Wl,--emit-relocs")

    abi = [s for s in secs if s["name"] == ".berm.abi"]
    manifest = None
    if len(abi) != 1:
        errs.append("no .berm.abi section" if not abi else "several .berm.abi sections")
    else:
        s = abi[0]
        if s["flags"] & 2:
            errs.append(".berm.abi is SHF_ALLOC (must be non-allocated)")
        try:
            manifest = json.loads(data[s["off"]:s["off"] + s["size"]].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as ex:
            errs.append(f".berm.abi is not one valid UTF-8 JSON value: {ex}")
    if manifest is not None:
        if not isinstance(manifest, dict):
            errs.append(".berm.abi is not a JSON object")
            manifest = None
    declared = set()
    if manifest is not None:
        v = manifest.get("abi_version")
        if v not in (0, 1):
            errs.append(f"abi_version {v!r} is not 0 or 1")
        if not isinstance(manifest.get("usage"), str):
            errs.append("usage is not a string")
        if v == 1 and not (isinstance(manifest.get("deps"), list) and all(isinstance(d, str) for d in manifest["deps"])):
            errs.append("ABI 1 manifest lacks a deps list of strings")
        tools = manifest.get("tools")
        if not isinstance(tools, list):
            errs.append("tools is not a list")
            tools = []
        for t in tools:
            if not (isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("description"), str)
                    and isinstance(t.get("parameters"), dict)):
                errs.append(f"malformed tool entry {t!r}")
                continue
            if t["name"] in declared:
                errs.append(f"tool {t['name']} declared twice")
            declared.add(t["name"])

    syms = {}
    for s in secs:
        if s["type"] != SHT_SYMTAB:
            continue
        strtab = secs[s["link"]]
        for i in range(s["size"] // 24):
            st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", data, s["off"] + i * 24)
            if st_info >> 4 in (1, 2):  # GLOBAL / WEAK
                syms[cstr(strtab["off"] + st_name)] = (st_value, st_info & 15, st_shndx)
    exports = {n[len("berm_tool_"):] for n, (v, t, sh) in syms.items() if n.startswith("berm_tool_") and t == 2 and sh != 0}
    for n in sorted(declared - exports):
        errs.append(f"tool {n} is declared but berm_tool_{n} is not exported")
    for n in sorted(exports - declared):
        errs.append(f"berm_tool_{n} is exported but not declared in .berm.abi")
    if "_start" not in syms:
        errs.append("no _start")

    tls = [p for p in phdrs if p[0] == PT_TLS]
    if tls:
        base = syms.get("__berm_tls_base")
        if base is None:
            errs.append("PT_TLS present but no __berm_tls_base symbol")
        elif base[0] != tls[0][3]:
            errs.append(f"__berm_tls_base {base[0]:#x} != PT_TLS p_vaddr {tls[0][3]:#x}")
        lo, hi = tls[0][3], tls[0][3] + tls[0][6]
        if not any(p[0] == PT_LOAD and p[3] <= lo and hi <= p[3] + p[6] for p in phdrs):
            errs.append("TLS block is not inside a PT_LOAD segment's memory")
    return errs


def main():
    bad = 0
    for path in sys.argv[1:]:
        errs = check(path)
        for e in errs:
            print(f"{path}: {e}")
        bad += bool(errs)
    if bad:
        sys.exit(f"check-manifests: {bad} of {len(sys.argv) - 1} file(s) failed")
    print(f"check-manifests: {len(sys.argv) - 1} file(s) OK")


if __name__ == "__main__":
    main()
