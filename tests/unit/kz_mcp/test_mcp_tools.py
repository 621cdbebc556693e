"""The MCP tools' contract without a server: schemas for every input and output, arguments
refused with where and what, package files checked, a new kernel's package from a bundle."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import jsonschema
import pytest

from kz_cli.contract import CliError
from kz_cli.starter import starter_package
from kz_events.ids import KernelId
from kz_mcp import TOOLS, tool_list
from kz_mcp.arguments import FileArg, StatusArgs, SubmitArgs, as_file_docs, decode_args, file_map
from kz_package import pack_files

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"


def test_every_tool_has_object_schemas_for_input_and_output() -> None:
    """Each listed tool has a description and valid JSON Schemas rooted at an object."""
    listed = tool_list()
    assert [t.name for t in listed] == [t.name for t in TOOLS]
    for tool in listed:
        assert tool.description
        for schema in (tool.input_schema, tool.output_schema):
            assert schema is not None and schema["type"] == "object"
            jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    ("cls", "arguments", "at"),
    [
        (StatusArgs, {"submission_id": "x"}, "$.submission_id"),
        (StatusArgs, {"submission_id": "0b5e8a52-4a4f", "wait_s": 600}, "$.wait_s"),
        (StatusArgs, {"submission_id": "0b5e8a52-4a4f", "colour": 1}, "$"),
        (SubmitArgs, {"files": []}, "$.files"),
        (SubmitArgs, {"files": [{"path": "a", "content": 3}]}, "$.files[0].content"),
        (SubmitArgs, {"files": [{"path": "a", "content": ""}], "tokens": "many"}, "$.tokens"),
    ],
)
def test_a_bad_argument_says_where_and_what(cls: type, arguments: dict, at: str) -> None:
    """`invalid_argument` with the place (`details.at`) and msgspec's expectation."""
    with pytest.raises(CliError) as caught:
        decode_args(cls, arguments)
    assert caught.value.code == "invalid_argument"
    assert caught.value.details["at"] == at
    assert caught.value.message.startswith(("Expected", "Object contains unknown field"))


@pytest.mark.parametrize("path", ["/etc/passwd", "../up", "src/../x", "src//x", "./src/a"])
def test_a_path_outside_the_package_is_refused(path: str) -> None:
    with pytest.raises(CliError) as caught:
        file_map([FileArg(path=path, content="x")])
    assert caught.value.details["at"] == "$.files[0].path"


def test_files_round_trip_text_and_bytes() -> None:
    """Text stays text; bytes that are not UTF-8 travel as base64; the executable bit too."""
    files = {"src/a.py": (0o644, b"print(1)\n"), "src/blob": (0o755, b"\xff\x00")}
    docs = as_file_docs(files)
    assert docs[1] == {"path": "src/blob", "content": base64.b64encode(b"\xff\x00").decode(),
                       "encoding": "base64", "executable": True}  # fmt: skip
    again = file_map([FileArg(**doc) for doc in docs])
    assert again == files


def _bundle() -> bytes:
    """A board's judge bundle as the git projector stores it: the judge files and reference/."""
    files: dict[str, tuple[int, bytes]] = {}
    for path in RMSNORM.rglob("*"):
        if path.is_file():
            rel = path.relative_to(RMSNORM).as_posix()
            if rel.startswith(".kernel_package/"):
                files[rel] = (0o644, path.read_bytes())
            else:
                files[f"reference/{rel}"] = (0o644, path.read_bytes())
    files["reference/PINNED.json"] = (0o644, b'{"commit": "c", "kernel_id": "k"}\n')
    out = io.BytesIO()
    pack_files(files, out)
    return out.getvalue()


def test_a_new_kernel_gets_the_boards_judge_and_its_reference_src() -> None:
    """The starter keeps the judge byte for byte, names the new id, ships an empty scoreboard
    and the reference's src/; it passes the package checks (starter_package validates)."""
    kid = KernelId.parse("cpu/Norm/RMSNorm/fp32/mine")
    starter = starter_package(kid, _bundle(), author="agent-1", judge_kernel="k")
    files = starter.files
    judge = RMSNORM / ".kernel_package" / "benchmark.py"
    assert files[".kernel_package/benchmark.py"][1] == judge.read_bytes()
    assert b"kernel_id: cpu/Norm/RMSNorm/fp32/mine" in files[".kernel_package/desc.yaml"][1]
    assert files[".kernel_package/bench_result.yaml"][1] == (
        b"schema_version: 1\nkernel_id: cpu/Norm/RMSNorm/fp32/mine\n"
    )
    assert files["src/rmsnorm.py"][1] == (RMSNORM / "src/rmsnorm.py").read_bytes()
    assert starter.reference == {"commit": "c", "kernel_id": "k"}
