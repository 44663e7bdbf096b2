#!/usr/bin/env python3
"""Post-link step: compose the .berm.abi manifest of a harness ELF and write it in place.

Reads the records that BERM_TOOL / BERM_USAGE / BERM_DEP / BERM_ON_WAKE / BERM_ON_NOTIFY put into the allocated section
`berm_tools` (kind, a, b, c, fn: five little-endian u64 each), follows their string pointers
through the section table, and adds a non-allocated section `.berm.abi` holding exactly one JSON
object:
  ABI 1: {"abi_version":1,"usage":...,"deps":[...],"tools":[{"name","description","parameters"}]}
  ABI 0: {"abi_version":0,"usage":...,"tools":[...]}
Usage: berm-manifest.py --abi N --objcopy OBJCOPY in.elf out.elf

A WebAssembly module (wasm32, linked by wasm-ld with --no-gc-sections) is read the same way: the
records are the data segment named `berm_tools` (the `name` section's data segment names), 24 bytes
each (u64 kind, then four u32 pointers), strings read from the module's initial memory; the JSON is
appended as the custom section `berm.abi` (clang 14 cannot emit one from C, so it is added after
linking; objcopy is not used).
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


# ---- JSON Schema check -------------------------------------------------------------------------
# The runtime validates tool arguments with Ajv's draft-07 dialect; a schema it cannot compile fails
# every call of that tool. This is the draft-07 meta-schema (json-schema.org/draft-07/schema, as
# bundled with Ajv 8) written out as checks, plus what Ajv checks when it compiles: local $refs
# resolve, patterns are regular expressions, and no other $schema dialect is named.

DRAFT07 = ("http://json-schema.org/draft-07/schema", "http://json-schema.org/draft-07/schema#")
SIMPLE_TYPES = {"array", "boolean", "integer", "null", "number", "object", "string"}
NUMBER_KEYS = ("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum")
COUNT_KEYS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
SCHEMA_KEYS = ("additionalItems", "contains", "additionalProperties", "propertyNames", "if", "then",
               "else", "not")
SCHEMA_MAP_KEYS = ("definitions", "properties", "patternProperties")
SCHEMA_ARRAY_KEYS = ("allOf", "anyOf", "oneOf")
STRING_KEYS = ("$id", "$ref", "$comment", "title", "description", "format", "contentMediaType",
               "contentEncoding", "$schema")
# Errors of Python's re that JavaScript's RegExp (u flag) raises too; other differences between
# the two dialects are not held against a pattern.
REGEX_ERRORS = ("missing ), unterminated subpattern", "unbalanced parenthesis", "nothing to repeat",
                "multiple repeat", "unterminated character set", "bad character range",
                "bad escape (end of pattern)")


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_count(v):
    return (isinstance(v, int) and not isinstance(v, bool) and v >= 0) or (
        isinstance(v, float) and v.is_integer() and v >= 0)


def regex_problem(pattern):
    """Why `pattern` is not a regular expression, or None (a close approximation of ECMA-262)."""
    import re
    if any(x in pattern for x in ("\\p{", "\\P{", "\\u{")):
        return None
    py = re.sub(r"\(\?<([A-Za-z_][A-Za-z0-9_]*)>", r"(?P<\1>", pattern)
    py = re.sub(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>", r"(?P=\1)", py)
    try:
        re.compile(py)
    except re.error as e:
        msg = str(e)
        if "unterminated character set" in msg and ("[]" in pattern or "[^]" in pattern):
            return None
        if any(msg.startswith(m) for m in REGEX_ERRORS):
            return f"not a regular expression ({msg})"
    return None


def pointer(root, ref):
    """Resolve a local $ref ("#" or "#/a/b") in root; None when it does not resolve."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def schema_problems(schema, root=None, at="#"):
    """Problems of a JSON Schema (draft-07) as "location: problem" strings; [] when valid."""
    root = schema if root is None else root
    out = []
    if isinstance(schema, bool):
        return out
    if not isinstance(schema, dict):
        return [f"{at}: a schema must be an object or a boolean, not {json.dumps(schema)[:40]}"]

    def bad(key, why):
        out.append(f"{at}/{key}: {why}")

    for key in STRING_KEYS:
        if key in schema and not isinstance(schema[key], str):
            bad(key, "must be a string")
    if isinstance(schema.get("$schema"), str) and schema["$schema"] not in DRAFT07:
        bad("$schema", f"the runtime reads draft-07 only ({DRAFT07[1]}), not {schema['$schema']}")
    if isinstance(schema.get("$ref"), str) and pointer(root, schema["$ref"]) is None:
        bad("$ref", f"{schema['$ref']} does not resolve inside this schema")
    for key in NUMBER_KEYS:
        if key in schema and not is_number(schema[key]):
            bad(key, "must be a number")
    if "multipleOf" in schema and not (is_number(schema["multipleOf"]) and schema["multipleOf"] > 0):
        bad("multipleOf", "must be a number > 0")
    for key in COUNT_KEYS:
        if key in schema and not is_count(schema[key]):
            bad(key, "must be an integer >= 0")
    for key in ("uniqueItems", "readOnly", "writeOnly"):
        if key in schema and not isinstance(schema[key], bool):
            bad(key, "must be true or false")
    if "pattern" in schema:
        if not isinstance(schema["pattern"], str):
            bad("pattern", "must be a string")
        elif regex_problem(schema["pattern"]):
            bad("pattern", regex_problem(schema["pattern"]))
    if "type" in schema:
        t = schema["type"]
        if isinstance(t, str):
            if t not in SIMPLE_TYPES:
                bad("type", f"{json.dumps(t)} is not one of {', '.join(sorted(SIMPLE_TYPES))}")
        elif isinstance(t, list):
            if not t or any(x not in SIMPLE_TYPES for x in t) or len(set(map(str, t))) != len(t):
                bad("type", "must be a non-empty list of distinct type names")
        else:
            bad("type", "must be a type name or a list of them")
    if "required" in schema:
        r = schema["required"]
        if not (isinstance(r, list) and all(isinstance(x, str) for x in r)):
            bad("required", "must be an array of strings")
        elif len(set(r)) != len(r):
            bad("required", "must not name a property twice")
    if "enum" in schema:
        e = schema["enum"]
        if not isinstance(e, list) or not e:
            bad("enum", "must be a non-empty array")
        elif len({json.dumps(x, sort_keys=True) for x in e}) != len(e):
            bad("enum", "must not list a value twice")
    if "examples" in schema and not isinstance(schema["examples"], list):
        bad("examples", "must be an array")
    for key in SCHEMA_KEYS:
        if key in schema:
            out += schema_problems(schema[key], root, f"{at}/{key}")
    if "items" in schema:
        it = schema["items"]
        if isinstance(it, list):
            if not it:
                bad("items", "an array of schemas must not be empty")
            for i, sub in enumerate(it):
                out += schema_problems(sub, root, f"{at}/items/{i}")
        else:
            out += schema_problems(it, root, f"{at}/items")
    for key in SCHEMA_MAP_KEYS:
        if key in schema:
            m = schema[key]
            if not isinstance(m, dict):
                bad(key, "must be an object whose values are schemas")
                continue
            for k, sub in m.items():
                if key == "patternProperties" and regex_problem(k):
                    bad(f"{key}/{k}", regex_problem(k))
                out += schema_problems(sub, root, f"{at}/{key}/{k}")
    for key in SCHEMA_ARRAY_KEYS:
        if key in schema:
            arr = schema[key]
            if not isinstance(arr, list) or not arr:
                bad(key, "must be a non-empty array of schemas")
                continue
            for i, sub in enumerate(arr):
                out += schema_problems(sub, root, f"{at}/{key}/{i}")
    if "dependencies" in schema:
        d = schema["dependencies"]
        if not isinstance(d, dict):
            bad("dependencies", "must be an object")
        else:
            for k, v in d.items():
                if isinstance(v, list):
                    if not all(isinstance(x, str) for x in v) or len(set(v)) != len(v):
                        bad(f"dependencies/{k}", "must be a schema or an array of distinct strings")
                else:
                    out += schema_problems(v, root, f"{at}/dependencies/{k}")
    return out


def uleb(data: bytes, p: int):
    v, shift = 0, 0
    while True:
        b = data[p]
        p += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, p


def sleb(data: bytes, p: int):
    v, shift = 0, 0
    while True:
        b = data[p]
        p += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            if b & 0x40:
                v -= 1 << shift
            return v, p


def uleb_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


class Wasm:
    """A wasm32 module's initial memory (its active data segments) and its named data segments."""

    RECORD = ("<QIIII", 24)

    def __init__(self, data: bytes):
        if data[:4] != b"\0asm":
            raise SystemExit("berm-manifest: not a WebAssembly module")
        self.module = data
        segments, names, customs = [], {}, set()
        p = 8
        while p < len(data):
            sid = data[p]
            size, q = uleb(data, p + 1)
            end = q + size
            if sid == 11:
                n, q = uleb(data, q)
                for i in range(n):
                    flags, q = uleb(data, q)
                    if flags == 1:
                        ln, q = uleb(data, q)
                        q += ln
                        segments.append(None)
                        continue
                    if flags == 2:
                        _, q = uleb(data, q)
                    if data[q] != 0x41:
                        raise SystemExit("berm-manifest: a data segment's offset is not an i32.const")
                    off, q = sleb(data, q + 1)
                    if data[q] != 0x0B:
                        raise SystemExit("berm-manifest: a data segment's offset is not an i32.const")
                    ln, q = uleb(data, q + 1)
                    segments.append((off, data[q:q + ln]))
                    q += ln
            elif sid == 0:
                ln, q = uleb(data, q)
                name = data[q:q + ln].decode("utf-8")
                customs.add(name)
                q += ln
                if name == "name":
                    while q < end:
                        sub = data[q]
                        ssize, r = uleb(data, q + 1)
                        if sub == 9:
                            n, r2 = uleb(data, r)
                            for _ in range(n):
                                idx, r2 = uleb(data, r2)
                                ln2, r2 = uleb(data, r2)
                                names[data[r2:r2 + ln2].decode("utf-8")] = idx
                                r2 += ln2
                        q = r + ssize
            p = end
        self.customs = customs
        top = max((s[0] + len(s[1]) for s in segments if s), default=0)
        memory = bytearray(top)
        for s in segments:
            if s:
                memory[s[0]:s[0] + len(s[1])] = s[1]
        self.data = bytes(memory)
        self.segments = segments
        self.names = names

    def section(self, name):
        idx = self.names.get(name)
        if idx is None or idx >= len(self.segments) or self.segments[idx] is None:
            return None
        off, payload = self.segments[idx]
        return dict(offset=off, size=len(payload))

    def string_at_vaddr(self, addr: int) -> str:
        if not 0 <= addr < len(self.data):
            raise SystemExit(f"berm-manifest: string pointer {addr:#x} is outside the initial memory")
        end = self.data.index(b"\0", addr)
        return self.data[addr:end].decode("utf-8")


def compose(elf, abi: int) -> str:
    sec = elf.section("berm_tools")
    fmt, size = getattr(elf, "RECORD", ("<QQQQQ", 40))
    tools, deps, usage, entries = [], [], [], []
    if sec is not None:
        if sec["size"] % size:
            raise SystemExit("berm-manifest: section berm_tools is not a whole number of records")
        for i in range(0, sec["size"], size):
            kind, a, b, c, fn = struct.unpack_from(fmt, elf.data, sec["offset"] + i)
            if kind == 1:
                name = elf.string_at_vaddr(a)
                schema_text = elf.string_at_vaddr(c) if c else ""
                try:
                    schema = json.loads(schema_text) if schema_text.strip() else {"type": "object"}
                except json.JSONDecodeError as e:
                    raise SystemExit(f"berm-manifest: tool {name}: parameters is not valid JSON: {e}")
                if not isinstance(schema, dict):
                    raise SystemExit(f"berm-manifest: tool {name}: parameters must be a JSON object")
                problems = schema_problems(schema)
                if problems:
                    raise SystemExit(f"berm-manifest: tool {name}: parameters is not a valid JSON Schema "
                                     f"(draft-07, as the runtime's validator reads it): " + "; ".join(problems[:5]))
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


def abi_of(args) -> int:
    return args.abi


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--abi", type=int, default=1)
    ap.add_argument("--objcopy", default="llvm-objcopy")
    ap.add_argument("input")
    ap.add_argument("output")
    args = ap.parse_args()
    with open(args.input, "rb") as f:
        data = f.read()
    if data[:4] == b"\0asm":
        wasm = Wasm(data)
        if "berm.abi" in wasm.customs:
            raise SystemExit("berm-manifest: input already has a berm.abi section")
        if abi_of(args) != 1:
            raise SystemExit("berm-manifest: a WebAssembly harness answers through berm.done (ABI 1)")
        payload = compose(wasm, 1).encode("utf-8")
        name = b"berm.abi"
        content = uleb_bytes(len(name)) + name + payload
        with open(args.output, "wb") as f:
            f.write(data + b"\0" + uleb_bytes(len(content)) + content)
        return
    elf = Elf(data)
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
