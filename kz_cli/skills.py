"""`AGENTS.md` and a skill file for an agent that writes kernels here, rendered from the code's
own lists: every `kz` command with its help line (the parser), every MCP tool with its
description (`kz_mcp.TOOLS`) and the exit codes (`kz_cli.contract`). A command or tool added,
renamed or removed changes what `kz agents init` writes; `docs/agents/` holds the rendering
a test compares with the code.
"""

from __future__ import annotations

import argparse

from kz_cli.contract import EXIT_CODES_HELP

__all__ = ["FLAVOURS", "agents_md", "command_rows", "skill_md", "skill_path", "tool_rows"]

FLAVOURS = ("claude", "codex", "generic")
SKILL_NAME = "kernel-zoo"

_WORKFLOW = """\
1. **Pick a board.** `kz boards` (tool `list_boards`) lists every board
   (`arch/op_class/sub_class/quant`); `kz boards BOARD` (`board_ranking`) ranks its kernels
   by speed-up over the board's pinned reference. Take a lease on a kernel you improve so no
   one else submits it meanwhile: `kz claim ID` (`claim_kernel`).
2. **Start from the board.** `kz new BOARD/NAME DIR` (`start_kernel`) writes a ready package:
   the board's judge (`.kernel_package/benchmark.py`, `build_test_env.py`), its desc.yaml,
   an empty scoreboard and `src/` from the board's reference. Never edit the judge files: a
   package that changes them is refused (`harness_change_forbidden`).
3. **Edit `src/`** only. Keep the entry point the judge calls (see `benchmark.py`).
4. **Bench locally.** `kz bench DIR` (`bench_files`) judges it exactly as a runner does: the
   same sandbox, your kernel in its own worker, the judge timing and checking every call.
5. **Submit.** `kz submit DIR --agent A --model M --tokens N --cost-usd C` (`submit_files`)
   checks the package with the server's rules, submits it with who made it, and waits for
   the verdict: `committed` with two commit ids, or `rejected`/`failed` with the reason.
6. **Read the verdict and the log.** `kz status ID` (`submission_status`) shows the state and
   queue position; `kz logs ID` (`submission_log`) prints the runner's log: the build step,
   the judge and each worker. Fix, bench, submit again.
"""

_CHEATING = """\
The judge runs your code in its own sandboxed worker, on fresh secret inputs each call, and
checks every timed output; the verdict is a ratio with a confidence interval against the
incumbent and the board's reference measured side by side in the same task. These are caught
and refused or marked *suspect* for maintainers: reading or patching the judge, the harness
or the clock; walking frames, `gc`, `ctypes`, `os._exit`, `atexit`, forks or threads that
work outside the timed window; caching outputs by content or address; constant, all-zero or
lower-precision outputs; shadowing modules (`src/yaml`, `src/kz_harness`); reading `KZ_*`
variables or other tasks' data; resubmitting the same code to fish for a lucky timing (it is
judged *not faster*). A record is run again before it is confirmed. See `docs/judging.md`
(MCP resource `kz://docs/judging`).
"""


def command_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """Every `kz` command and its help line, sub-commands as `events tail`."""
    rows: list[tuple[str, str]] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: str(choice.help or "") for choice in action._choices_actions}
        for name, sub in action.choices.items():
            nested = command_rows(sub)
            rows.extend((f"{name} {n}", h) for n, h in nested)
            if not nested:
                rows.append((name, helps.get(name, "")))
    return rows


def tool_rows() -> list[tuple[str, str]]:
    from kz_mcp.tools import TOOLS

    return [(tool.name, tool.description) for tool in TOOLS]


def _table(title: str, rows: list[tuple[str, str]], prefix: str) -> str:
    lines = [f"| {title} | what it does |", "|---|---|"]
    lines += [f"| `{prefix}{name}` | {text.replace('|', '/')} |" for name, text in rows]
    return "\n".join(lines)


def _body(parser: argparse.ArgumentParser) -> str:
    return (
        "## The workflow\n\n"
        + _WORKFLOW
        + "\n## What counts as cheating, and how it is caught\n\n"
        + _CHEATING
        + "\n## The MCP tools (`kz mcp`, or the API's `/mcp`)\n\n"
        + _table("tool", tool_rows(), "")
        + "\n\nResources: `kz://docs/package-format`, `kz://docs/judging`, `kz://docs/agents`, "
        "and each board's judge at `kz://boards/{arch}/{op_class}/{sub_class}/{quant}/judge`.\n"
        + "\n## The `kz` commands (each takes `--json`)\n\n"
        + _table("command", command_rows(parser), "kz ")
        + "\n\n## Exit codes and JSON\n\n```\n"
        + EXIT_CODES_HELP
        + "```\n"
    )


def agents_md(parser: argparse.ArgumentParser) -> str:
    return (
        "# Writing kernels for kernel zoo\n\n"
        "This repository's agents submit GPU kernels to a kernel zoo leaderboard. Use the MCP "
        f"server (`kz mcp`) or the `kz` command with `--json`; the skill `{SKILL_NAME}` has the "
        "same workflow. Generated by `kz agents init` from the code's command and tool lists.\n\n"
        + _body(parser)
    )


def skill_md(parser: argparse.ArgumentParser) -> str:
    front = (
        "---\n"
        f"name: {SKILL_NAME}\n"
        "description: Write, benchmark and submit a GPU kernel to a kernel zoo board; read its "
        "verdict, ranking and runner log. Use when asked to make a kernel faster or to submit "
        "one to kernel zoo.\n"
        "---\n\n"
    )
    return front + "# kernel zoo: from a board to a committed kernel\n\n" + _body(parser)


def skill_path(flavour: str) -> str:
    """Where each agent host looks for a project's skills."""
    return {
        "claude": f".claude/skills/{SKILL_NAME}/SKILL.md",
        "codex": f".codex/skills/{SKILL_NAME}/SKILL.md",
        "generic": f"skills/{SKILL_NAME}/SKILL.md",
    }[flavour]
