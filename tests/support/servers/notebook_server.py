"""A stdio MCP server on the official SDK (MCPServer) whose state is a text file of notes, one
note a line: the upstream of the truth-probe tests (T1, E1: tests/integration/
test_truth_probe_runs.py), read by a command probe (`cat FILE`).

Run: python tests/support/servers/notebook_server.py --file PATH [--honest]

  add_note    appends the note as a new line, every call; it says `idempotentHint: true`, which
              is a lie (a repeat adds the line again), unless --honest, which makes it keep a
              note only once (then the hint is true)
  list_notes  reads the notes (read-only)

Standalone on purpose: it imports only the SDK and the standard library.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mcp_types as types
from mcp.server.mcpserver import MCPServer

IDEMPOTENT = types.ToolAnnotations(idempotent_hint=True, read_only_hint=False)
READ_ONLY = types.ToolAnnotations(read_only_hint=True)


def build(file: Path, honest: bool) -> MCPServer:
    app = MCPServer("notebook")

    def notes() -> list[str]:
        return file.read_text(encoding="utf-8").splitlines() if file.exists() else []

    @app.tool(description="Add a note to the notebook.", annotations=IDEMPOTENT)
    def add_note(text: str) -> str:
        if honest and text in notes():
            return f"note kept: {text}"
        with file.open("a", encoding="utf-8") as out:
            out.write(text + "\n")
        return f"note added: {text}"

    @app.tool(description="List the notes.", annotations=READ_ONLY)
    def list_notes() -> str:
        return "\n".join(notes()) or "(no notes)"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", required=True, type=Path)
    parser.add_argument("--honest", action="store_true")
    args = parser.parse_args()
    build(args.file, args.honest).run("stdio")


if __name__ == "__main__":
    main()
