"""Where a process's time went: a flat `perf report --stdio --no-children --sort sym`
on stdin, summed by what each symbol belongs to (the kernel, the allocator, each crate)."""

import re
import sys
from collections import Counter

# The first pattern a symbol matches names its part.
PARTS = [
    ("allocator, memcpy", r"malloc|free|_int_|unlink_chunk|realloc|__rust_(no_)?alloc|__rdl_|__rust_dealloc|mem(move|cpy|cmp|set)"),
    ("sqlx", r"sqlx"),
    ("hyper, http", r"hyper|httparse|\bhttp::|h2::"),
    ("reqwest", r"reqwest"),
    ("axum, tower", r"axum|tower"),
    ("tokio", r"tokio"),
    ("serde_json", r"serde"),
    ("tracing", r"tracing"),
    ("agent_sessions", r"agent_sessions"),
]

parts = Counter()
for line in sys.stdin:
    match = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(.*)", line)
    if not match:
        continue
    share, kind, symbol = float(match[1]), match[2], match[3]
    if kind == "k":
        part = "kernel: scheduling, TCP, syscalls"
    else:
        part = next((name for name, pattern in PARTS if re.search(pattern, symbol)), "other")
    parts[part] += share
for part, share in parts.most_common():
    print(f"{share:5.1f}%  {part}")
