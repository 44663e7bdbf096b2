#!/usr/bin/env python3
"""Test of berm-manifest.py's JSON Schema check.

Each case's verdict is written from the draft-07 specification (json-schema.org/draft-07); when
the repository's node_modules holds Ajv (the runtime's validator), every case is also compiled by
Ajv and the two verdicts must agree. Usage: test-manifest-schema.py [REPO_ROOT]
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..")

spec = importlib.util.spec_from_file_location("berm_manifest", os.path.join(HERE, "berm-manifest.py"))
bm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bm)

VALID = [
    {},
    {"type": "object"},
    {"type": ["string", "null"]},
    {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"},
                                                           "limit": {"type": "integer", "minimum": 0}}},
    {"type": "object", "additionalProperties": False, "properties": {"x": True, "y": False}},
    {"enum": ["read", "write", 1, None]},
    {"type": "array", "items": [{"type": "string"}, {"type": "number"}], "additionalItems": False},
    {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "minLength": 1, "maxLength": 64},
    {"pattern": "(?<year>\\d{4})-\\k<year>"},
    {"pattern": "\\p{L}+"},
    {"definitions": {"pos": {"type": "integer", "minimum": 1}}, "properties": {"n": {"$ref": "#/definitions/pos"}}},
    {"properties": {"self": {"$ref": "#"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
    {"anyOf": [{"type": "string"}, {"type": "integer"}], "not": {"const": 3}},
    {"if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}, "else": {}},
    {"patternProperties": {"^x-": {"type": "string"}}, "propertyNames": {"maxLength": 10}},
    {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
    {"multipleOf": 0.5, "exclusiveMinimum": 0},
    {"format": "not-a-known-format"},
    {"x-vendor": {"anything": [1, 2]}},
    {"minItems": 2.0},
]

INVALID = [
    ({"type": "objekt"}, "#/type"),
    ({"type": []}, "#/type"),
    ({"type": ["string", "string"]}, "#/type"),
    ({"type": 5}, "#/type"),
    ({"required": "path"}, "#/required"),
    ({"required": ["a", "a"]}, "#/required"),
    ({"properties": {"a": 5}}, "#/properties/a"),
    ({"properties": []}, "#/properties"),
    ({"properties": {"a": {"type": "strng"}}}, "#/properties/a/type"),
    ({"minLength": -1}, "#/minLength"),
    ({"maxItems": 1.5}, "#/maxItems"),
    ({"minimum": "0"}, "#/minimum"),
    ({"multipleOf": 0}, "#/multipleOf"),
    ({"enum": []}, "#/enum"),
    ({"enum": "a"}, "#/enum"),
    ({"enum": [1, 1]}, "#/enum"),
    ({"items": []}, "#/items"),
    ({"items": 3}, "#/items"),
    ({"allOf": []}, "#/allOf"),
    ({"anyOf": {}}, "#/anyOf"),
    ({"not": "x"}, "#/not"),
    ({"additionalProperties": "no"}, "#/additionalProperties"),
    ({"uniqueItems": "yes"}, "#/uniqueItems"),
    ({"pattern": "("}, "#/pattern"),
    ({"pattern": "a**"}, "#/pattern"),
    ({"pattern": "[z-a]"}, "#/pattern"),
    ({"pattern": 5}, "#/pattern"),
    ({"patternProperties": {"(": {}}}, "#/patternProperties/("),
    ({"$ref": "#/definitions/missing"}, "#/$ref"),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema"}, "#/$schema"),
    ({"title": 5}, "#/title"),
    ({"dependencies": {"a": [1]}}, "#/dependencies/a"),
    ({"type": "object", "properties": {"deep": {"items": {"anyOf": [{"minimum": "x"}]}}}},
     "#/properties/deep/items/anyOf/0/minimum"),
]

# Refused on purpose although Ajv compiles it: Ajv never compiles a patternProperties key whose
# regex is broken (it silently matches nothing), which hides the mistake.
STRICTER = [{"patternProperties": {"(": {}}}]

failures = 0


def fail(msg):
    global failures
    failures += 1
    print(f"FAIL {msg}")


for s in VALID:
    p = bm.schema_problems(s)
    if p:
        fail(f"valid schema refused: {json.dumps(s)}: {p}")
for s, where in INVALID:
    p = bm.schema_problems(s)
    if not p:
        fail(f"invalid schema accepted: {json.dumps(s)}")
    elif not any(x.startswith(where + ":") for x in p):
        fail(f"{json.dumps(s)}: problem not located at {where}: {p}")
print(f"manifest-schema: {len(VALID)} valid and {len(INVALID)} invalid schemas judged as the spec says")

# Cross-check with Ajv, the runtime's validator (an independent implementation).
ajv = os.path.join(ROOT, "node_modules", "ajv", "dist", "ajv.js")
node = shutil.which("node")
if node and os.path.exists(ajv):
    script = """
const { Ajv } = await import(process.argv[1]);
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = cases.map((c) => { try { new Ajv({ strict: false, logger: false }).compile(c); return true; } catch { return false; } });
console.log(JSON.stringify(out));
""".replace("require('fs')", "(await import('node:fs'))")
    cases = VALID + [s for s, _ in INVALID]
    r = subprocess.run([node, "--input-type=module", "-e", script, ajv], input=json.dumps(cases),
                       capture_output=True, text=True, check=True)
    verdicts = json.loads(r.stdout)
    before = failures
    for s, ok in zip(cases, verdicts):
        ours = not bm.schema_problems(s)
        if ours != ok and s not in STRICTER:
            fail(f"Ajv {'accepts' if ok else 'refuses'} but berm-manifest {'accepts' if ours else 'refuses'}: {json.dumps(s)}")
    if failures == before:
        print(f"manifest-schema: Ajv agrees on {len(cases) - len(STRICTER)} schemas "
              f"({len(STRICTER)} refused on purpose though Ajv compiles them)")
else:
    print("manifest-schema: Ajv cross-check not run (needs node and node_modules/ajv: npm ci)")

if failures:
    sys.exit(f"manifest-schema: {failures} failure(s)")
