"""Generate the Python client from openapi.yaml with openapi-python-client, strictly.

    python conformance/generate_client.py OPENAPI_YAML OUTPUT_DIR

The same as `openapi-python-client generate --path OPENAPI_YAML --output-path OUTPUT_DIR
--overwrite --config conformance/openapi-python-client.yaml --meta none`, except for the
warnings: the generator leaves out of the client whatever it cannot parse and only warns,
so this fails on every warning but the one it is known and allowed to give (the
`application/yaml` answer of `GET /openapi.yaml`: the generator has no YAML support).
The package lands in OUTPUT_DIR/agent_sessions_client; put OUTPUT_DIR on PYTHONPATH.
"""

from __future__ import annotations

import sys
from pathlib import Path

from openapi_python_client import generate
from openapi_python_client.config import Config, ConfigFile, MetaType

CONFIG = Path(__file__).with_name("openapi-python-client.yaml")

# (header, a phrase of the detail) of each warning that is allowed.
ALLOWED = {
    (
        "WARNING parsing GET /openapi.yaml within operations.",
        "Unsupported content_type application/yaml",
    ),
}


def allowed(error: object) -> bool:
    header = str(getattr(error, "header", ""))
    detail = str(getattr(error, "detail", "") or "")
    return any(header == h and phrase in detail for h, phrase in ALLOWED)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    document, output = Path(argv[1]), Path(argv[2])
    config = Config.from_sources(
        ConfigFile.load_from_path(CONFIG),
        MetaType.NONE,
        document,
        "utf-8",
        True,
        output_path=output / "agent_sessions_client",
    )
    errors = generate(config=config)
    unexpected = [error for error in errors if not allowed(error)]
    for error in errors:
        mark = "allowed" if allowed(error) else "FAILED"
        print(f"generate_client: {mark}: {error.header} {error.detail or ''}".rstrip())
    if unexpected:
        print(
            f"generate_client: openapi-python-client could not fully use the document "
            f"({len(unexpected)} unexpected warning(s) or error(s) above)",
            file=sys.stderr,
        )
        return 1
    if not (output / "agent_sessions_client" / "__init__.py").is_file():
        print("generate_client: no package was generated", file=sys.stderr)
        return 1
    print(f"generate_client: generated {output / 'agent_sessions_client'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
