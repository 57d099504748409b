"""PNG through Graphviz: `dot -Tpng` as a subprocess (the one piece of the graph package that does I/O)."""

from __future__ import annotations

import shutil
import subprocess

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
INSTALL_HINT = ("install Graphviz (Debian/Ubuntu: `apt-get install graphviz`, macOS: `brew install graphviz`; "
                "scripts/install-system-deps.sh does it here), or use --format dot / --format mermaid")


class GraphvizError(RuntimeError):
    """`dot` is missing or failed; the message says which and what to do."""


def dot_executable() -> str:
    path = shutil.which("dot")
    if path is None:
        raise GraphvizError(f"Graphviz `dot` is not on PATH: {INSTALL_HINT}")
    return path


def run_dot(source: str, fmt: str = "png", *, timeout: float = 60.0) -> bytes:
    """Render DOT `source` with `dot -T<fmt>`; returns the output bytes."""
    exe = dot_executable()
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=source.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise GraphvizError(f"`dot -T{fmt}` did not finish within {timeout:.0f} s") from None
    except OSError as exc:
        raise GraphvizError(f"cannot run {exe}: {exc}: {INSTALL_HINT}") from None
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
        raise GraphvizError(f"`dot -T{fmt}` failed: {detail}")
    return proc.stdout


def render_png(dot_source: str) -> bytes:
    data = run_dot(dot_source, "png")
    if not data.startswith(PNG_MAGIC):
        raise GraphvizError("`dot -Tpng` did not produce a PNG (is this Graphviz build missing the png renderer?)")
    return data
