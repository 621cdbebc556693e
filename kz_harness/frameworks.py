"""Problem-set conventions on PyTorch: a KernelBench `ModelNew`, a GPU MODE `custom_kernel(data)`,
a FlashInfer `run(...)` or a plain torch function, each turned into one call on the slot's arrays.

The worker builds the candidate's call at LOAD (`load_candidate`) from the fields the judge sends
every implementation alike (`framework`, `convention`, `init`); the judge builds its reference
from the problem's sources with the same `Adapter` (kz_harness.problemsets), so both sides see
the same conversions. Inputs arrive as the slot's numpy arrays (on a GPU, as device tensors of
the slot's dtypes) and become torch tensors of the declared dtypes (`torch.from_numpy` views
where the convention never writes into its inputs, copies where it does); bfloat16 and float8
travel as float32, which holds them exactly, and scalars as one-element arrays. The call runs
under `torch.no_grad()`; what it returns must be exactly a `torch.Tensor` (no subclass) of each
declared dtype, which is converted back to the slot's dtype (several outputs: flattened one
after the other).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import inspect
import json
import os
import sys
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CONVENTIONS",
    "SLOT_DTYPES",
    "Adapter",
    "bind_axes",
    "decode_args",
    "encode_args",
    "flatten",
    "install_sources",
    "load_candidate",
    "prime",
    "rebuild",
    "slot_dtype",
]

CONVENTIONS = ("function", "kernelbench", "gpumode", "flashinfer")
# What a torch dtype travels as in a slot: numpy's own, or float32 where numpy has none (it
# holds every bfloat16 and float8 value exactly).
SLOT_DTYPES = {
    "float64": "float64",
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "float32",
    "float8_e4m3fn": "float32",
    "float8_e5m2": "float32",
    "int64": "int64",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}
_SOLUTION_FILE = "solution.json"  # a FlashInfer Solution, as the format writes it


def _torch() -> Any:
    torch = importlib.import_module("torch")
    torch.set_num_threads(1)  # one core, as the worker's BLAS gets
    return torch


def prime(document: Mapping[str, Any]) -> None:
    """What a trusted worker does for a torch board before its no-op calls: load torch and run
    one small operation, so its threads (the judge's baseline) are what a candidate's are."""
    if document.get("framework") == "torch":
        _torch().ones(4).sum()


# --- values in slots ------------------------------------------------------------------------


def slot_dtype(torch_dtype: str) -> str:
    """The numpy dtype name a declared torch dtype travels as; ValueError for one that cannot."""
    try:
        return SLOT_DTYPES[torch_dtype]
    except KeyError:
        raise ValueError(
            f"dtype {torch_dtype!r} cannot travel in a slot (expected one of "
            f"{', '.join(SLOT_DTYPES)})"
        ) from None


def flatten(value: Any, torch: Any) -> tuple[Any, list[Any]]:
    """A nested input (tuple, list, dict of tensors and scalars) as a structure and its leaves,
    in order; `rebuild(structure, leaves)` gives it back. The structure is plain JSON."""
    leaves: list[Any] = []

    def walk(item: Any) -> Any:
        if isinstance(item, torch.Tensor | int | float | bool):
            leaves.append(item)
            return {"leaf": len(leaves) - 1}
        if isinstance(item, tuple | list):
            return {"tuple" if isinstance(item, tuple) else "list": [walk(x) for x in item]}
        if isinstance(item, dict):
            return {"dict": [[str(k), walk(v)] for k, v in item.items()]}
        if item is None or isinstance(item, str):
            return {"const": item}
        raise ValueError(f"cannot send a {type(item).__name__} to a worker: tensors, numbers, "
                         "strings, None, and tuples, lists or dicts of them")  # fmt: skip

    return walk(value), leaves


def rebuild(structure: Any, leaves: Sequence[Any]) -> Any:
    """The value `flatten` took apart, with `leaves` in its places."""
    if "leaf" in structure:
        return leaves[int(structure["leaf"])]
    if "tuple" in structure:
        return tuple(rebuild(s, leaves) for s in structure["tuple"])
    if "list" in structure:
        return [rebuild(s, leaves) for s in structure["list"]]
    if "dict" in structure:
        return {k: rebuild(s, leaves) for k, s in structure["dict"]}
    return structure.get("const")


def encode_args(value: Any) -> Any:
    """Constructor arguments as JSON, tuples kept apart from lists (nn layers care)."""
    if isinstance(value, tuple):
        return {"tuple": [encode_args(v) for v in value]}
    if isinstance(value, list):
        return [encode_args(v) for v in value]
    if isinstance(value, dict):
        return {"dict": {str(k): encode_args(v) for k, v in value.items()}}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ValueError(
        f"an init input of type {type(value).__name__} cannot be sent to a worker: numbers, "
        "strings, None, and tuples, lists or dicts of them"
    )


def decode_args(value: Any) -> Any:
    """The inverse of `encode_args`."""
    if isinstance(value, list):
        return [decode_args(v) for v in value]
    if isinstance(value, dict) and "tuple" in value:
        return tuple(decode_args(v) for v in value["tuple"])
    if isinstance(value, dict) and "dict" in value:
        return {k: decode_args(v) for k, v in value["dict"].items()}
    return value


class Adapter:
    """Conversions between a slot's arrays and the tensors a convention's call takes and gives.

    `spec["inputs"]` and `spec["outputs"]` list `{name, dtype, scalar}` in slot order (torch
    dtype names); `copy_inputs` gives the call tensors of its own (a convention that writes into
    its inputs, such as GPU MODE's output buffers, must not write into the slot); `device` is
    where `numpy_call` runs the call (the judge's reference on a GPU board).
    """

    def __init__(
        self,
        torch: Any,
        spec: Mapping[str, Any],
        *,
        copy_inputs: bool = False,
        device: str = "cpu",
    ) -> None:
        self.torch = torch
        self.device = device
        self.inputs = list(spec.get("inputs", []))
        self.outputs = list(spec.get("outputs", []))
        if not self.outputs:
            raise ValueError("a torch board declares at least one output")
        self.in_dtypes = [getattr(torch, i["dtype"]) for i in self.inputs]
        self.out_dtypes = [getattr(torch, o["dtype"]) for o in self.outputs]
        slots = {slot_dtype(o["dtype"]) for o in self.outputs}
        self.out_slot = slots.pop() if len(slots) == 1 else "float64"
        self.copy_inputs = copy_inputs

    def values(self, tensors: Sequence[Any]) -> list[Any]:
        """The call's arguments from the slot's tensors: declared dtypes, scalars as Python's."""
        if len(tensors) != len(self.inputs):
            raise ValueError(f"{len(tensors)} inputs came for {len(self.inputs)} declared")
        out = []
        for tensor, spec, dtype in zip(tensors, self.inputs, self.in_dtypes, strict=True):
            if spec.get("scalar"):
                out.append(tensor.reshape(-1)[0].item())
                continue
            if tensor.dtype != dtype:
                tensor = tensor.to(dtype)
            elif self.copy_inputs:
                tensor = tensor.clone()
            out.append(tensor)
        return out

    def outputs_of(self, result: Any) -> list[Any]:
        """The declared outputs in `result`: one tensor, or a tuple, list or dict of them (by
        name), a Python number for a scalar output."""
        if isinstance(result, dict):
            missing = [o["name"] for o in self.outputs if o["name"] not in result]
            if missing:
                raise TypeError(f"the output dict lacks {missing}")
            return [result[o["name"]] for o in self.outputs]
        if isinstance(result, tuple | list) and len(self.outputs) > 1:
            if len(result) != len(self.outputs):
                raise TypeError(f"{len(result)} outputs returned, {len(self.outputs)} declared")
            return list(result)
        if len(self.outputs) > 1:
            raise TypeError(f"one value returned, {len(self.outputs)} outputs declared")
        return [result]

    def slot_tensor(self, result: Any) -> Any:
        """The call's result as one tensor of the slot's dtype, each output checked first."""
        torch = self.torch
        parts = []
        for value, spec, dtype in zip(
            self.outputs_of(result), self.outputs, self.out_dtypes, strict=True
        ):
            if spec.get("scalar") and isinstance(value, int | float | bool):
                value = torch.tensor(value, dtype=dtype)
            if type(value) is not torch.Tensor:
                kind = type(value)
                raise TypeError(
                    f"the output must be a torch.Tensor, got {kind.__module__}.{kind.__qualname__}"
                )
            if value.dtype != dtype:
                raise TypeError(f"the output {spec['name']!r} must be {dtype}, got {value.dtype}")
            parts.append(value.to(getattr(torch, self.out_slot)))
        if len(parts) == 1:
            return parts[0]
        return torch.cat([p.reshape(-1) for p in parts])

    def numpy_call(self, call: Callable[[list[Any]], Any]) -> Callable[..., Any]:
        """`call` on the slot's numpy arrays, returning a numpy array of the slot's dtype."""
        torch = self.torch
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

        def run(*arrays: Any) -> Any:
            with torch.no_grad():
                tensors = [torch.from_numpy(a) for a in arrays]
                if self.device != "cpu":
                    tensors = [t.to(self.device) for t in tensors]
                out = self.slot_tensor(call(self.values(tensors)))
            if out.device.type != "cpu":
                if self.device == "cpu":
                    raise TypeError(f"the output must be on the CPU, got {out.device}")
                out = out.cpu()
            return out.numpy()

        return run

    def tensor_call(self, call: Callable[[list[Any]], Any]) -> Callable[..., Any]:
        """`call` on device tensors of the slot's dtypes (a GPU worker's `Device` makes them and
        copies the result back), returning a tensor of the slot's dtype."""
        torch = self.torch

        def run(*tensors: Any) -> Any:
            with torch.no_grad():
                return self.slot_tensor(call(self.values(tensors)))

        return run


# --- sources served as modules --------------------------------------------------------------


class _Sources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves named modules from source text (a problem's own files), ahead of every path."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self.sources = dict(sources)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.sources:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, origin=f"<problem:{fullname}>")

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        code = compile(self.sources[module.__name__], f"<problem:{module.__name__}>", "exec")
        exec(code, module.__dict__)  # noqa: S102 - the problem's own source, imported on purpose


def install_sources(sources: Mapping[str, str]) -> None:
    """Make each `name: source` importable as module `name`, ahead of `sys.path` (a problem's
    files win over a candidate's files of the same name, as the problem set's own runner has
    it)."""
    if sources:
        sys.meta_path.insert(0, _Sources(sources))


# --- the conventions, in a worker -----------------------------------------------------------


def _entry(document: Mapping[str, Any]) -> tuple[str, str]:
    module, _, name = str(document["entry"]).partition(":")
    return module, name


def _attribute(module_name: str, name: str) -> Any:
    module = importlib.import_module(module_name)
    found = getattr(module, name, None)
    if not callable(found):
        raise TypeError(f"{module_name}:{name}: {name!r} is not defined there, or not callable")
    return found


def _function(torch: Any, document: Mapping[str, Any], spec: Mapping[str, Any]) -> Any:
    fn = _attribute(*_entry(document))
    return lambda values: fn(*values)


def _kernelbench(torch: Any, document: Mapping[str, Any], spec: Mapping[str, Any]) -> Any:
    """`ModelNew(*init inputs)` built after `torch.manual_seed(init seed)`, as KernelBench builds
    both models, so a model that makes the same layers gets the reference's weights."""
    cls = _attribute(*_entry(document))
    torch.manual_seed(int(spec.get("init_seed", 0)))
    with torch.no_grad():
        model = cls(*decode_args(spec.get("init_args", [])))
    if document.get("device") == "cuda" and hasattr(model, "to"):
        model = model.to("cuda")
    return lambda values: model(*values)


def _gpumode(torch: Any, document: Mapping[str, Any], spec: Mapping[str, Any]) -> Any:
    """`custom_kernel(data)`, with the task's own modules (task, utils, reference) importable."""
    install_sources(spec.get("modules", {}))
    kernel = _attribute(*_entry(document))
    structure = spec.get("structure", {"leaf": 0})
    return lambda values: kernel(rebuild(structure, values))


def _solution(path: Path) -> dict[str, Any] | None:
    """The FlashInfer Solution in `src/solution.json`, when the candidate brought one."""
    file = path / _SOLUTION_FILE
    if not file.is_file():
        return None
    solution = json.loads(file.read_text())
    if not isinstance(solution, dict) or not isinstance(solution.get("spec"), dict):
        raise ValueError(f"{_SOLUTION_FILE}: expected a FlashInfer Solution with a spec")
    return solution


def _solution_sources(solution: Mapping[str, Any], src: Path) -> Path:
    """Where the Solution's files are: `src/` when its entry file is there, else its embedded
    `sources`, written to a private folder of the worker's scratch space."""
    entry_file = str(solution["spec"]["entry_point"]).split("::")[0]
    if (src / entry_file).is_file():
        return src
    root = Path(os.environ.get("TMPDIR", "/tmp")) / "kz-solution"  # noqa: S108
    for source in solution.get("sources", []):
        target = (root / str(source["path"])).resolve()
        if root.resolve() not in target.parents:
            raise ValueError(f"{_SOLUTION_FILE}: source path {source['path']!r} leaves its folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(source["content"]))
    return root


def _flashinfer(torch: Any, document: Mapping[str, Any], spec: Mapping[str, Any]) -> Any:
    """`run(*inputs)`: the entry point and destination-passing style of `src/solution.json`
    when there is one, else the board's entry, destination-passing when `run` names the
    outputs among its parameters."""
    src = Path(str(document["path"]))
    solution = _solution(src)
    if solution is not None:
        folder = _solution_sources(solution, src)
        if folder != src:
            sys.path.insert(0, str(folder))
        file, _, name = str(solution["spec"]["entry_point"]).partition("::")
        module = file.removesuffix(".py").replace("/", ".")
        run = _attribute(module, name)
        dps = bool(solution["spec"].get("destination_passing_style", True))
    else:
        run = _attribute(*_entry(document))
        names = set(inspect.signature(run).parameters)
        dps = all(o["name"] in names for o in spec["outputs"])
    if not dps:
        return lambda values: run(*values)
    return _destination_passing(torch, run, spec, document.get("device") == "cuda")


def _destination_passing(torch: Any, run: Any, spec: Mapping[str, Any], cuda: bool) -> Any:
    """Outputs allocated from the definition's axes (variables bound from the inputs' shapes)
    and passed after the inputs; what `run` wrote into them is the result."""
    device = "cuda" if cuda else "cpu"
    dtypes = [getattr(torch, o["dtype"]) for o in spec["outputs"]]

    def call(values: list[Any]) -> Any:
        axes = bind_axes(spec, values)
        outs = [
            torch.empty([axes[a] for a in o["shape"]], dtype=dtype, device=device)
            for o, dtype in zip(spec["outputs"], dtypes, strict=True)
        ]
        run(*values, *outs)
        return tuple(outs) if len(outs) > 1 else outs[0]

    return call


def bind_axes(spec: Mapping[str, Any], values: Sequence[Any]) -> dict[str, int]:
    """Every axis's value: the constants, and each variable from the first input it shapes."""
    axes = {name: value for name, value in spec.get("axes", {}).items() if value is not None}
    for item, value in zip(spec["inputs"], values, strict=True):
        for axis, size in zip(item.get("shape") or [], getattr(value, "shape", ()), strict=False):
            axes.setdefault(axis, int(size))
    return axes


_LOADERS: dict[str, Callable[[Any, Mapping[str, Any], Mapping[str, Any]], Any]] = {
    "function": _function,
    "kernelbench": _kernelbench,
    "gpumode": _gpumode,
    "flashinfer": _flashinfer,
}


def load_candidate(document: Mapping[str, Any], *, on_device: bool) -> Callable[..., Any]:
    """The candidate's call for a worker, from the judge's LOAD document: on the CPU it takes
    the slot's numpy arrays and returns a numpy array; on a GPU (`on_device`) it takes and
    returns device tensors, for the worker's `Device` to time and copy."""
    convention = str(document.get("convention", "function"))
    if convention not in _LOADERS:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    torch = _torch()
    spec = document.get("init") or {}
    sys.path.insert(0, str(document["path"]))
    call = _LOADERS[convention](torch, document, spec)
    adapter = Adapter(torch, spec, copy_inputs=convention == "gpumode" and not on_device)
    return adapter.tensor_call(call) if on_device else adapter.numpy_call(call)
