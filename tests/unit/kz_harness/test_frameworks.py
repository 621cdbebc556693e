"""The torch adapters a worker loads a candidate through (kz_harness.frameworks): numpy slots
in, exactly a torch.Tensor of the declared dtype out, and each problem set's convention."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kz_harness.frameworks import (
    Adapter,
    decode_args,
    encode_args,
    flatten,
    load_candidate,
    rebuild,
)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.unit

SPEC = {"inputs": [{"name": "x", "dtype": "float32", "scalar": False}],
        "outputs": [{"name": "y", "dtype": "float32"}]}  # fmt: skip


@pytest.fixture
def imports() -> Iterator[None]:
    """What a loaded candidate adds to sys.path, sys.meta_path and sys.modules, taken away."""
    path, meta, modules = list(sys.path), list(sys.meta_path), set(sys.modules)
    yield
    sys.path[:] = path
    sys.meta_path[:] = meta
    for name in set(sys.modules) - modules:
        del sys.modules[name]


def _src(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    return src


def _readonly(*arrays: Any) -> list[Any]:
    out = []
    for array in arrays:
        copy = np.array(array)
        copy.flags.writeable = False
        out.append(copy)
    return out


def test_structures_and_init_arguments_round_trip() -> None:
    """Nested inputs come apart into leaves and back; tuples stay tuples in init arguments."""
    value = (torch.ones(2), [3, 2.5, True], {"k": torch.zeros(1), "none": None, "s": "x"})
    structure, leaves = flatten(value, torch)
    assert json.loads(json.dumps(structure)) == structure and len(leaves) == 5
    assert rebuild(structure, leaves)[1] == [3, 2.5, True]
    assert rebuild(structure, leaves)[2]["none"] is None
    args = [4, (3, 3), {"a": (1, 2)}, "name", None]
    assert decode_args(json.loads(json.dumps(encode_args(args)))) == args
    with pytest.raises(ValueError, match="init input of type Tensor"):
        encode_args([torch.ones(1)])


def test_bfloat16_travels_as_float32_exactly() -> None:
    """A bfloat16 input arrives as bfloat16, and a bfloat16 output leaves as its float32 value."""
    spec = {"inputs": [{"name": "x", "dtype": "bfloat16"}],
            "outputs": [{"name": "y", "dtype": "bfloat16"}]}  # fmt: skip
    seen = []

    def call(values: list[Any]) -> Any:
        seen.append(values[0].dtype)
        return values[0] * 2

    slot = torch.randn(8).to(torch.bfloat16).float().numpy()
    out = Adapter(torch, spec).numpy_call(call)(*_readonly(slot))
    assert seen == [torch.bfloat16] and out.dtype == np.float32
    assert np.array_equal(out, slot * 2)


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (lambda x: x.double(), "must be torch.float32, got torch.float64"),
        (lambda x: x.numpy(), "must be a torch.Tensor, got numpy.ndarray"),
        (lambda x: torch.nn.Parameter(x), "must be a torch.Tensor, got torch.nn.parameter"),
        (lambda x: (x, x), "must be a torch.Tensor, got builtins.tuple"),
    ],
)
def test_an_output_must_be_exactly_the_declared_tensor(result: Any, message: str) -> None:
    run = Adapter(torch, SPEC).numpy_call(lambda values: result(values[0]))
    with pytest.raises(TypeError, match=message):
        run(*_readonly(np.ones(3, dtype=np.float32)))


def test_several_outputs_leave_flattened_by_name_or_order() -> None:
    spec = {"inputs": SPEC["inputs"], "outputs": [{"name": "a", "dtype": "float32"},
                                                  {"name": "b", "dtype": "float32"}]}  # fmt: skip
    adapter = Adapter(torch, spec)
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    by_name = adapter.numpy_call(lambda v: {"b": v[0] + 1, "a": v[0]})(*_readonly(x))
    in_order = adapter.numpy_call(lambda v: (v[0], v[0] + 1))(*_readonly(x))
    assert np.array_equal(by_name, in_order) and by_name.shape == (8,)
    with pytest.raises(TypeError, match=r"lacks \[.b.\]"):
        adapter.numpy_call(lambda v: {"a": v[0]})(*_readonly(x))


def test_a_scalar_input_arrives_as_a_python_number() -> None:
    spec = {"inputs": [SPEC["inputs"][0], {"name": "eps", "dtype": "float32", "scalar": True}],
            "outputs": SPEC["outputs"]}  # fmt: skip
    kinds = []
    Adapter(torch, spec).numpy_call(lambda v: kinds.append(type(v[1])) or v[0])(
        *_readonly(np.ones(2, dtype=np.float32), np.array([0.5], dtype=np.float32))
    )
    assert kinds == [float]


@pytest.mark.usefixtures("imports")
def test_kernelbench_models_get_the_reference_weights(tmp_path: Path) -> None:
    """ModelNew built after the public init seed has the weights Model gets from it."""
    src = _src(tmp_path, {"model_new.py": (
        "import torch\n\nclass ModelNew(torch.nn.Module):\n"
        "    def __init__(self, n, scale):\n        super().__init__()\n"
        "        self.lin = torch.nn.Linear(n, n)\n        self.scale = scale\n"
        "    def forward(self, x):\n        return self.lin(x) * self.scale\n")})  # fmt: skip
    init = {**SPEC, "init_seed": 7, "init_args": [8, 0.5]}
    run = load_candidate({"entry": "model_new:ModelNew", "path": str(src), "framework": "torch",
                          "convention": "kernelbench", "init": init}, on_device=False)  # fmt: skip
    torch.manual_seed(7)
    reference = torch.nn.Linear(8, 8)
    x = np.random.default_rng(1).standard_normal((4, 8), dtype=np.float32)
    with torch.no_grad():
        expected = (reference(torch.from_numpy(x)) * 0.5).numpy()
    assert np.allclose(run(*_readonly(x)), expected, atol=1e-6)


@pytest.mark.usefixtures("imports")
def test_gpumode_writes_into_its_own_copy_with_the_task_modules_served(tmp_path: Path) -> None:
    """custom_kernel(data) gets the data rebuilt, writes into its output buffer, and the slot's
    arrays stay as they were; `task` comes from the problem, not from src/."""
    src = _src(tmp_path, {
        "submission.py": "from task import scale\n\ndef custom_kernel(data):\n"
                         "    a, c = data\n    c[...] = a * scale\n    return c\n",
        "task.py": "scale = 100.0\n",
    })  # fmt: skip
    init = {"inputs": [{"dtype": "float32"}, {"dtype": "float32"}],
            "outputs": [{"name": "out", "dtype": "float32"}],
            "structure": {"tuple": [{"leaf": 0}, {"leaf": 1}]},
            "modules": {"task": "scale = 2.0\n"}}  # fmt: skip
    run = load_candidate({"entry": "submission:custom_kernel", "path": str(src),
                          "framework": "torch", "convention": "gpumode", "init": init},
                         on_device=False)  # fmt: skip
    a, c = _readonly(np.ones(3, dtype=np.float32), np.zeros(3, dtype=np.float32))
    assert np.array_equal(run(a, c), np.full(3, 2.0, dtype=np.float32))
    assert np.array_equal(c, np.zeros(3, dtype=np.float32))


@pytest.mark.usefixtures("imports")
@pytest.mark.parametrize("on_disk", [True, False])
def test_flashinfer_solution_json_decides_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_disk: bool
) -> None:
    """A Solution's entry point and destination-passing style are used; its sources are read
    from src/ when there, else written to the worker's scratch space."""
    kernel = "def run(A, B, C):\n    C.copy_(A @ B.T)\n"
    solution = {"name": "s", "definition": "gemm", "author": "t",
                "spec": {"language": "python", "target_hardware": ["CPU"],
                         "entry_point": "pkg/kernel.py::run", "destination_passing_style": True},
                "sources": [{"path": "pkg/kernel.py", "content": kernel}]}  # fmt: skip
    files = {"solution.json": json.dumps(solution)}
    if on_disk:
        files["pkg/kernel.py"] = kernel
    src = _src(tmp_path, files)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "scratch"))
    init = {"inputs": [{"name": "A", "dtype": "float32", "shape": ["M", "K"]},
                       {"name": "B", "dtype": "float32", "shape": ["N", "K"]}],
            "outputs": [{"name": "C", "dtype": "float32", "shape": ["M", "N"]}],
            "axes": {"M": None, "N": 3, "K": 2}}  # fmt: skip
    run = load_candidate({"entry": "main:run", "path": str(src), "framework": "torch",
                          "convention": "flashinfer", "init": init}, on_device=False)  # fmt: skip
    a = np.arange(10, dtype=np.float32).reshape(5, 2)
    b = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert np.array_equal(run(*_readonly(a, b)), a @ b.T)
    assert (tmp_path / "scratch" / "kz-solution" / "pkg" / "kernel.py").exists() is not on_disk


@pytest.mark.usefixtures("imports")
def test_an_unknown_convention_and_a_missing_entry_are_refused(tmp_path: Path) -> None:
    src = _src(tmp_path, {"main.py": "x = 1\n"})
    document = {"entry": "main:run", "path": str(src), "framework": "torch", "init": SPEC}
    with pytest.raises(ValueError, match="convention must be one of"):
        load_candidate({**document, "convention": "triton"}, on_device=False)
    with pytest.raises(TypeError, match="'run' is not defined there"):
        load_candidate({**document, "convention": "function"}, on_device=False)


def test_on_a_device_the_call_takes_and_gives_tensors_of_the_slots_dtypes() -> None:
    """What a GPU worker's Device hands the call: tensors of the slot's dtypes; back: one."""
    spec = {"inputs": [{"name": "x", "dtype": "bfloat16"}],
            "outputs": [{"name": "y", "dtype": "bfloat16"}]}  # fmt: skip
    run = Adapter(torch, spec).tensor_call(lambda v: v[0] + 1)
    out = run(torch.ones(4, dtype=torch.float32))
    assert type(out) is torch.Tensor and out.dtype == torch.float32
    assert out.tolist() == [2.0] * 4


@pytest.mark.usefixtures("imports")
def test_the_worker_loads_a_torch_board_at_load_and_calls_it_as_any(tmp_path: Path) -> None:
    """The worker's LOAD with `framework: torch` builds the call, the trusted no-op loads torch
    too, and a call through a real shared-memory slot writes the output into it."""
    from kz_harness.channel import make_slots, new_shared_memory
    from kz_harness.worker import CALIBRATE, _Worker

    src = _src(tmp_path, {"kernel.py": "def double(x):\n    return x * 2\n"})
    fields = {"framework": "torch", "convention": "function", "init": SPEC}
    worker = _Worker(channel=None, np=np)  # type: ignore[arg-type]
    worker.load({"entry": "kernel:double", "path": str(src), **fields})
    no_op = _Worker(channel=None, np=np)  # type: ignore[arg-type]
    no_op.load({"entry": CALIBRATE, **fields})
    assert no_op.calibrate and "torch" in sys.modules
    layout = make_slots([("float32", (3,), 4)], ("float32", (3,), 4))
    fd, memory = new_shared_memory(layout.size)
    x = np.ndarray((3,), np.float32, buffer=memory, offset=layout.inputs[0].offset)
    x[...] = [1, 2, 3]
    worker.set_slots(layout.to_dict(), [fd])
    worker.call(0)
    out = np.ndarray((3,), np.float32, buffer=memory, offset=layout.output.offset)
    assert out.tolist() == [2.0, 4.0, 6.0]
