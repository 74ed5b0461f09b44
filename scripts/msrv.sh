#!/usr/bin/env bash
# Checks that `rust-version` in Cargo.toml is the true minimum: no locked dependency
# (for any target, dev-dependencies included) declares a newer one. No older toolchain
# can be installed here, so the locked packages' own declarations are the evidence.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo metadata --format-version 1 --locked | python3 -c '
import json, sys

def version(text):
    return tuple(int(part) for part in text.split("."))[:2]

meta = json.load(sys.stdin)
ours = next(p for p in meta["packages"] if p["id"] in meta["workspace_members"])
said = ours["rust_version"]
declared = version(said)
needs = max(
    (version(p["rust_version"]), p["name"], p["version"])
    for p in meta["packages"]
    if p.get("rust_version") and p["id"] != ours["id"]
)
# Edition 2024 crates need Rust 1.85 even when they declare no rust-version.
if any(p["edition"] == "2024" for p in meta["packages"]):
    needs = max(needs, ((1, 85), "edition 2024", ""))
floor = ".".join(map(str, needs[0]))
if declared < needs[0]:
    sys.exit(f"msrv: Cargo.toml says rust-version {said}, but {needs[1]} {needs[2]} needs {floor}")
if declared > needs[0]:
    sys.exit(f"msrv: Cargo.toml says rust-version {said}, but the locked packages need only {floor}; lower it")
print(f"msrv: rust-version {said} is what {needs[1]} {needs[2]} needs")
'
