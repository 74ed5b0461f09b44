"""The Python client's venv (``clients/python/.venv``) for the benchmarks that drive the
client from Python: a script asks for the modules it imports, and when they are missing
it is run again in that venv, with what it needs installed there. Nothing is installed
globally.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "clients" / "python"
VENV = CLIENT / ".venv"


def run_in_client_venv(
    script: str, modules: Sequence[str], packages: Sequence[str], marker: str
) -> None:
    """Returns when ``modules`` import here. Else installs ``packages`` (pip arguments)
    and the client's test requirements into the venv and runs ``script`` again there,
    with ``marker`` set in its environment, so that a second miss fails instead."""
    try:
        for module in modules:
            importlib.import_module(module)
        return
    except ImportError:
        if os.environ.get(marker):
            raise
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    install = [str(python), "-m", "pip", "install", "-q", *packages]
    subprocess.run([*install, "-r", str(CLIENT / "requirements-test.txt")], check=True)
    os.execve(str(python), [str(python), script, *sys.argv[1:]], {**os.environ, marker: "1"})
