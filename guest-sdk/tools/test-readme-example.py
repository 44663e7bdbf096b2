#!/usr/bin/env python3
"""Build and host-test the wake example of guest-sdk/README.md exactly as printed: the first C
block of section "6. Wakes and notifications" is the harness, the second the body of its host
test. Usage: test-readme-example.py README.md
"""
import os
import re
import subprocess
import sys
import tempfile

SDK = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
text = open(sys.argv[1]).read()
m = re.search(r"^## 6\. Wakes and notifications\n(.*?)(?=^## )", text, re.S | re.M)
if not m:
    sys.exit("readme-example: no section '## 6. Wakes and notifications'")
blocks = re.findall(r"```c\n(.*?)```", m.group(1), re.S)
if len(blocks) != 2:
    sys.exit(f"readme-example: expected 2 C blocks in section 6, found {len(blocks)}")
with tempfile.TemporaryDirectory() as tmp:
    d = os.path.join(tmp, "beat")
    os.mkdir(d)
    open(os.path.join(d, "beat.c"), "w").write(blocks[0])
    open(os.path.join(d, "test_beat.c"), "w").write(
        '#include <string.h>\n#include "berm_host.h"\nvoid berm_host_test(void) {\n' + blocks[1] + "}\n")
    open(os.path.join(d, "Makefile"), "w").write(f"HARNESS = beat\nSRCS = beat.c\ninclude {SDK}/berm.mk\n")
    r = subprocess.run(["make", "--no-print-directory", "-s", "-C", d, "all", "host-test"],
                       capture_output=True, text=True)
    if r.returncode != 0 or "PASS" not in r.stdout or "warning" in r.stderr:
        sys.exit(f"readme-example: the README's wake example does not build and pass cleanly:\n"
                 f"{r.stdout}{r.stderr}")
    r = subprocess.run([sys.executable, os.path.join(SDK, "tools", "check-manifests.py"),
                        os.path.join(d, "build", "beat.elf")], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"readme-example: {r.stdout}")
    syms = subprocess.run(["riscv64-unknown-elf-nm", os.path.join(d, "build", "beat.elf")],
                          capture_output=True, text=True, check=True).stdout
    for export in ("on_wake", "on_notify", "berm_tool_start"):
        if not re.search(rf" T {export}$", syms, re.M):
            sys.exit(f"readme-example: {export} is not a global function of the built ELF")
print("readme-example: the README's wake example builds (on_wake, on_notify exported) and its host test passes")
