"""`kz agents init`: AGENTS.md and the skill are rendered from the code's own command and tool
lists, so the committed rendering (docs/agents/) cannot drift from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kz_cli.cmd_agents import DOCS_DIR, rendered_files
from kz_cli.main import build_parser, main
from kz_cli.skills import command_rows, tool_rows

pytestmark = pytest.mark.unit


def test_the_committed_rendering_is_what_the_code_renders_now() -> None:
    """docs/agents/ equals a fresh rendering (python -m kz_cli.cmd_agents rewrites it)."""
    files = rendered_files("generic")
    assert (DOCS_DIR / "AGENTS.md").read_text() == files["AGENTS.md"]
    assert (DOCS_DIR / "SKILL.md").read_text() == files["skills/kernel-zoo/SKILL.md"]


def test_every_command_and_tool_is_named() -> None:
    """Each kz command and each MCP tool appears in both files."""
    commands = [name for name, _ in command_rows(build_parser())]
    tools = [name for name, _ in tool_rows()]
    assert {"submit", "new", "boards", "mcp", "agents init", "events tail"} <= set(commands)
    for text in rendered_files("generic").values():
        for command in commands:
            assert f"`kz {command}`" in text
        for tool in tools:
            assert f"`{tool}`" in text


def test_init_writes_the_flavour_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--claude writes AGENTS.md, the skill under .claude/skills and .mcp.json; a second run
    refuses (exit 2) unless --force."""
    assert main(["agents", "init", "--claude", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "agents init" and len(doc["written"]) == 3
    skill = (tmp_path / ".claude/skills/kernel-zoo/SKILL.md").read_text()
    assert skill.startswith("---\nname: kernel-zoo\ndescription: ")
    servers = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]
    assert servers["kernel-zoo"]["args"] == ["mcp"]
    assert main(["agents", "init", "--claude", str(tmp_path), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "target_exists"
    assert main(["agents", "init", "--claude", str(tmp_path), "--force"]) == 0
