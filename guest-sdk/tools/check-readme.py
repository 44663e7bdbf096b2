#!/usr/bin/env python3
"""Check that every SDK name a document mentions exists: each `berm_*`, `BERM_*` and `json_*`
identifier in backticks (a trailing `*` or `_X` means "some name with this prefix") must be defined
in guest-sdk/include/*.h, guest-sdk/host/berm_host.h or guest-sdk/berm.mk (make variables), or be
one of the host's own names a guest document may mention: a /metrics series (src/daemon/metrics.ts)
or a PostgreSQL table (src/store/pg-schema.ts).

Usage: check-readme.py DOC.md...
"""
import glob
import os
import re
import sys

SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
headers = glob.glob(os.path.join(SDK, "include", "*.h")) + [os.path.join(SDK, "host", "berm_host.h"),
                                                            os.path.join(SDK, "berm.mk")]
text = "".join(open(h).read() for h in headers)
defined = set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", text))
ROOT = os.path.join(SDK, "..")
for host_file in ("src/daemon/metrics.ts", "src/store/pg-schema.ts"):
    host_text = open(os.path.join(ROOT, host_file)).read()
    defined |= set(re.findall(r"'(berm_[a-z0-9_]+)'", host_text))
    defined |= set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(berm_[a-z0-9_]+)", host_text))

bad = 0
count = 0
for doc in sys.argv[1:]:
    for n, line in enumerate(open(doc), 1):
        for span in re.findall(r"`([^`]+)`", line):
            for name in re.findall(r"(?<![A-Za-z0-9_./])((?:berm_|BERM_|json_|crabtalk_)[A-Za-z0-9_]*\*?)", span):
                if name.endswith("_") and not name.endswith("*"):
                    continue
                count += 1
                prefix = name[:-1] if name.endswith("*") else name[:-1] if name.endswith("_X") else None
                ok = any(d.startswith(prefix) for d in defined) if prefix else name in defined
                if not ok:
                    print(f"{doc}:{n}: `{name}` is not defined by the SDK headers")
                    bad += 1
if bad:
    sys.exit(f"check-readme: {bad} unknown name(s)")
print(f"check-readme: {count} SDK names mentioned, all defined")
