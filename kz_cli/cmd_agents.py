"""`kz agents init [--claude|--codex|--generic] [DIR]`: write `AGENTS.md` and a skill file
(`kz_cli.skills`, rendered from the code's own command and tool lists) into a project, and for
Claude Code a `.mcp.json` that starts `kz mcp`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kz_cli.contract import CliError, emit
from kz_cli.skills import FLAVOURS, agents_md, skill_md, skill_path

__all__ = ["register", "rendered_files"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("agents", help="set a project up for coding agents")
    sub = parser.add_subparsers(dest="agents_command", required=True, metavar="SUBCOMMAND")
    init = sub.add_parser(
        "init", help="write AGENTS.md and a kernel zoo skill file", description=__doc__
    )
    group = init.add_mutually_exclusive_group()
    for flavour in FLAVOURS:
        group.add_argument(
            f"--{flavour}",
            dest="flavour",
            action="store_const",
            const=flavour,
            help=f"write the skill to {skill_path(flavour)}",
        )
    init.add_argument("dir", nargs="?", type=Path, default=Path(), help="project folder (.)")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")
    init.set_defaults(handler=_handle_init, flavour="generic")


def rendered_files(flavour: str) -> dict[str, str]:
    """path → text of what `kz agents init --FLAVOUR` writes."""
    from kz_cli.main import build_parser

    parser = build_parser()
    files = {"AGENTS.md": agents_md(parser), skill_path(flavour): skill_md(parser)}
    if flavour == "claude":
        server = {"command": "kz", "args": ["mcp"], "env": {"KZ_SUBMITTER_ID": "claude"}}
        files[".mcp.json"] = json.dumps({"mcpServers": {"kernel-zoo": server}}, indent=2) + "\n"
    return files


def _handle_init(args: argparse.Namespace) -> int:
    files = rendered_files(args.flavour)
    there = [p for p in files if (args.dir / p).exists()]
    if there and not args.force:
        raise CliError(
            "target_exists",
            f"{', '.join(there)} exist in {args.dir}",
            fix="give --force to overwrite them, or another DIR",
        )
    for path, text in files.items():
        out = args.dir / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    if args.json:
        emit(args, {"flavour": args.flavour, "written": [str(args.dir / p) for p in files]})
    else:
        for path in files:
            print(f"wrote {args.dir / path}")
    return 0


DOCS_DIR = Path(__file__).resolve().parents[1] / "docs" / "agents"


def write_docs(folder: Path = DOCS_DIR) -> list[Path]:
    """Render the generic AGENTS.md and skill into `docs/agents/` (a test compares them)."""
    files = rendered_files("generic")
    written = []
    for path, text in files.items():
        out = folder / Path(path).name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        written.append(out)
    return written


if __name__ == "__main__":  # pragma: no cover - regenerates docs/agents/
    for written in write_docs():
        print(f"wrote {written}")
