#!/usr/bin/env python3
"""embed_console.py INPUT.html OUTPUT.c - the console page as a C array
(const char gw_console_html[], NUL-ended), so the gateway serves it from
its own binary. Run by Meson at build time; needs nothing but Python. An
array of numbers, not a string literal: ISO C's limit on literal length
(-Woverlength-strings) does not apply to it."""
import sys

with open(sys.argv[1], "rb") as f:
    data = f.read() + b"\0"
out = ["/* generated from console.html by embed_console.py */",
       "const char gw_console_html[] = {"]
for i in range(0, len(data), 16):
    out.append("    " + ", ".join(str(b) for b in data[i:i + 16]) + ",")
out.append("};")
with open(sys.argv[2], "w") as f:
    f.write("\n".join(out) + "\n")
