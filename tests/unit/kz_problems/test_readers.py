"""The three readers on sets written for kernel zoo: what becomes a problem (ids, boards,
workloads, tolerances, sources), and what is skipped or refused, naming the file and field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kz_problems import ProblemError, read_set

pytestmark = pytest.mark.unit

Copy = Callable[[str], Path]


def test_kernelbench_reads_levels_and_skips_hub_models(example_set: Copy) -> None:
    """Every level file is a problem with KernelBench's seed and fp32 tolerance; the level 4
    model, whose weights come from the hub, is skipped with the reason."""
    problems, skipped = read_set("kernelbench", example_set("kernelbench"))
    assert [p.problem_id for p in problems] == [
        "level1/1_Row_Softmax", "level1/2_Square_Matmul", "level2/1_Linear_GELU_Scale",
    ]  # fmt: skip
    fused = problems[2]
    assert (fused.op_class, fused.sub_class, fused.quant) == (
        "KernelBench", "L2_1_Linear_GELU_Scale", "fp32",
    )  # fmt: skip
    assert fused.judge["entry"] == "model_new:ModelNew" and fused.judge["init_seed"] == 42
    assert fused.judge["atol"] == fused.judge["rtol"] == 1e-4
    assert fused.workloads == [{"name": "default", "params": {
        "batch_size": 256, "in_features": 1024, "out_features": 1024, "scale": 0.5}}]  # fmt: skip
    assert "ModelNew = Model" in fused.reference_src["model_new.py"]
    assert [s.problem for s in skipped] == ["level4/1_Hub_Language_Model"]
    assert "hub" in skipped[0].reason and "not supported yet" in skipped[0].reason
    assert skipped[0].where.endswith("level4/1_Hub_Language_Model.py")


def test_kernelbench_names_the_missing_function(example_set: Copy) -> None:
    """A problem without get_init_inputs is refused with the file and the name it lacks."""
    root = example_set("kernelbench")
    file = root / "KernelBench" / "level1" / "1_Row_Softmax.py"
    file.write_text(file.read_text().replace("def get_init_inputs", "def init_inputs"))
    with pytest.raises(ProblemError) as caught:
        read_set("kernelbench", file)
    assert caught.value.where.endswith("1_Row_Softmax.py")
    assert "get_init_inputs: expected a top-level function" in caught.value.message


def test_kernelbench_single_file_is_one_problem(example_set: Copy) -> None:
    root = example_set("kernelbench")
    problems, skipped = read_set("kernelbench", root / "KernelBench/level1/2_Square_Matmul.py")
    assert [p.problem_id for p in problems] == ["level1/2_Square_Matmul"] and skipped == []


def test_gpumode_reads_tasks_tolerances_and_licence(example_set: Copy) -> None:
    """Benchmark shapes become workloads, the tolerances come from make_match_reference, the
    task's modules are served by name, and the set's licence keeps its conditions."""
    problems, skipped = read_set("gpumode", example_set("gpumode"))
    matmul, prefix = problems
    assert matmul.problem_id == "kz_demo/matmul_py" and matmul.sub_class == "kz_demo.matmul_py"
    assert (matmul.quant, prefix.quant) == ("fp32", "fp64")
    assert [w["name"] for w in matmul.workloads] == ["m512_n512_k512", "m384_n768_k512"]
    assert matmul.workloads[0]["params"]["seed"] == 31337
    assert (matmul.judge["rtol"], matmul.judge["atol"]) == (1e-4, 1e-4)
    assert (prefix.judge["rtol"], prefix.judge["atol"]) == (1e-9, 1e-7)
    assert sorted(matmul.sources) == ["reference", "task", "utils"]
    assert matmul.extra["tests"][0] == {"m": 64, "n": 64, "k": 64, "seed": 4242}
    licence = matmul.provenance.licence
    assert licence is not None and licence.spdx.startswith("LicenseRef-Example-Reciprocal")
    assert "conditions" in licence.conditions and "publish" in licence.text
    assert [(s.problem, "multi_gpu" in s.reason) for s in skipped] == [
        ("kz_demo/allgather_py", True)
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("reference.py", "check_implementation = make_match_reference(ref_kernel, rtol=1e-04, "
          "atol=1e-04)", "def check_implementation(data, output):\n    return True, ''"),
         "check_implementation is the task's own function"),
        (("task.yml", 'lang: "py"', 'lang: "cu"'), "lang: 'cu' submissions are not supported"),
        (("task.yml", "benchmarks:", "benchmarkz:"), "benchmarks: expected a list of shapes"),
        (("reference.py", "def ref_kernel", "def reference_kernel"),
         "ref_kernel: expected a top-level function"),
        (("task.yml", '"source": "task.py"', '"source": "missing.py"'),
         "files[1].source: missing.py not found"),
    ],
)  # fmt: skip
def test_gpumode_refuses_what_it_cannot_judge(
    example_set: Copy, change: tuple[str, str, str], expected: str
) -> None:
    """Each refusal names the task's file and field."""
    name, old, new = change
    task = example_set("gpumode") / "problems" / "kz_demo" / "matmul_py"
    text = (task / name).read_text()
    assert old in text
    (task / name).write_text(text.replace(old, new))
    with pytest.raises(ProblemError) as caught:
        read_set("gpumode", task)
    assert caught.value.where.startswith(str(task)) and expected in caught.value.message


def test_flashinfer_reads_definitions_and_their_workloads(example_set: Copy) -> None:
    """A definition with a var axis gets one workload per line of its JSONL, keeping the
    original workload (uuid, axes, inputs); safetensors-only definitions are skipped."""
    problems, skipped = read_set("flashinfer", example_set("flashinfer"))
    by_id = {p.problem_id: p for p in problems}
    assert sorted(by_id) == ["add_rmsnorm_h2048", "gemm_n1024_k1024", "rmsnorm_h4096"]
    gemm = by_id["gemm_n1024_k1024"]
    assert [w["params"]["axes"] for w in gemm.workloads] == [{"M": 256}, {"M": 384}]
    assert gemm.workloads[0]["params"]["uuid"] == "5f0c4e9a-1b6e-4f55-9a7e-0d9c1f3e2a01"
    assert gemm.judge["definition"]["axes"]["M"] == {"type": "var", "description": "rows of A"}
    assert "reference" not in gemm.judge["definition"]  # it travels as a source
    assert gemm.sources["reference"].startswith("import torch")
    assert gemm.reference_src == {"main.py": gemm.sources["reference"]}
    assert by_id["rmsnorm_h4096"].quant == "bf16"
    assert by_id["rmsnorm_h4096"].workloads[0]["params"]["inputs"]["eps"] == {
        "type": "scalar", "value": 1e-6}  # fmt: skip
    assert [s.problem for s in skipped] == ["moe_blob"]
    assert "safetensors" in skipped[0].reason


def test_flashinfer_keeps_only_the_first_workloads(example_set: Copy) -> None:
    root = example_set("flashinfer")
    problems, _ = read_set("flashinfer", root / "definitions/gemm/gemm_n1024_k1024.json",
                           max_workloads=1)  # fmt: skip
    assert [w["params"]["axes"] for w in problems[0].workloads] == [{"M": 256}]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["inputs"]["A"].update(dtype="fp16"),
         "inputs.A.dtype: expected one of float32"),
        (lambda d: d["inputs"]["A"].update(shape=["M", "Q"]),
         "inputs.A.shape: axis 'Q' is not in axes"),
        (lambda d: d["axes"].update(N={"type": "const", "value": -1}), "axes.N: expected"),
        (lambda d: d.update(reference="def main(A, B):\n    return A\n"),
         "reference: expected a top-level function run"),
        (lambda d: d.update(op_type=""), "op_type: expected a non-empty string"),
        (lambda d: d["outputs"].update(A={"shape": None, "dtype": "float32"}),
         "outputs: names must differ"),
        (lambda d: d["inputs"]["A"].update(dtype="float4_e2m1"), "not supported yet"),
    ],
)  # fmt: skip
def test_flashinfer_refuses_a_bad_definition_naming_the_field(
    example_set: Copy, edit: Callable[[dict[str, object]], None], expected: str
) -> None:
    file = example_set("flashinfer") / "definitions" / "gemm" / "gemm_n1024_k1024.json"
    definition = json.loads(file.read_text())
    edit(definition)
    file.write_text(json.dumps(definition))
    with pytest.raises(ProblemError) as caught:
        read_set("flashinfer", file)
    assert caught.value.where == str(file) and expected in caught.value.message


def test_flashinfer_refuses_a_workload_without_its_var_axis(example_set: Copy) -> None:
    root = example_set("flashinfer")
    jsonl = root / "workloads" / "gemm" / "gemm_n1024_k1024.jsonl"
    jsonl.write_text(jsonl.read_text().replace('"M": 256', '"rows": 256'))
    with pytest.raises(ProblemError) as caught:
        read_set("flashinfer", root / "definitions" / "gemm" / "gemm_n1024_k1024.json")
    assert caught.value.where == f"{jsonl}:1"
    assert "axes.M: expected an integer >= 0" in caught.value.message


@pytest.mark.parametrize("fmt", ["kernelbench", "gpumode", "flashinfer"])
def test_a_folder_of_nothing_is_refused(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "README.md").write_text("no problems here\n")
    with pytest.raises(ProblemError) as caught:
        read_set(fmt, tmp_path)
    assert caught.value.where == str(tmp_path) and "found" in caught.value.message


def test_an_unknown_path_and_format_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="PATH: expected a checkout"):
        read_set("kernelbench", tmp_path / "nowhere")
    with pytest.raises(ProblemError, match="expected one of kernelbench, gpumode, flashinfer"):
        read_set("triton", tmp_path)
