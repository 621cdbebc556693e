"""The judge of a board imported from a problem set (KernelBench, GPU MODE, FlashInfer Trace):
inputs drawn the set's way from the task's secret seed, the set's own reference run on pristine
copies, the set's tolerances.

`kz problems import` writes each board's `benchmark.py` as a call of `problem_benchmark` on the
problem's description and its sources, verbatim; everything below runs in the judge's process.
At start the judge draws one input set from a public seed and runs the reference on it, to learn
the inputs' and outputs' dtypes (and GPU MODE's data structure), which every worker is told at
LOAD (`init`). KernelBench models are built after `torch.manual_seed(init_seed)`, a public seed
the board names, in the judge and in every worker alike, never from the task's secret seed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kz_harness.errors import HarnessError
from kz_harness.frameworks import (
    Adapter,
    encode_args,
    flatten,
    install_sources,
    rebuild,
    slot_dtype,
)
from kz_harness.judge import Benchmark, Output, Timing, Workload

__all__ = ["FORMATS", "problem_benchmark"]

FORMATS = ("kernelbench", "gpumode", "flashinfer")
_PUBLIC_SEED = 0  # the start-up draw that learns dtypes: never timed, never checked
_SEED_RANGE = 2**62
# FlashInfer-Bench's random integers: [low, high) by dtype.
_INT_RANGES = {"int8": (-128, 128), "int16": (-1024, 1024), "int32": (-1024, 1024),
               "int64": (-1024, 1024), "uint8": (0, 256)}  # fmt: skip


def _name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _leaf_spec(leaf: Any, torch: Any) -> dict[str, Any]:
    """A drawn value's `{dtype, scalar}` as the workers are told it."""
    if isinstance(leaf, torch.Tensor):
        dtype = _name(leaf.dtype)
        slot_dtype(dtype)  # refuses a dtype no slot can hold, at start
        return {"dtype": dtype, "scalar": False}
    kind = "bool" if isinstance(leaf, bool) else "int64" if isinstance(leaf, int) else "float64"
    return {"dtype": kind, "scalar": True}


class _Format:
    """One set's way to draw inputs and run its reference, on torch values (tensors and
    Python numbers, in slot order)."""

    convention = "function"

    def __init__(self, torch: Any, problem: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        self.torch = torch
        self.problem = problem
        self.device = "cuda" if problem.get("device") == "cuda" else "cpu"
        install_sources(sources)

    def draw(self, workload: Workload, seed: int) -> list[Any]:
        raise NotImplementedError

    def reference(self, values: list[Any]) -> Any:
        raise NotImplementedError

    def init(self, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"inputs": inputs, "outputs": outputs}


class _KernelBench(_Format):
    """`Model(*get_init_inputs())`, weights from the public init seed; `get_inputs()` after
    `torch.manual_seed` of a number drawn from the task's secret seed."""

    convention = "kernelbench"

    def __init__(self, torch: Any, problem: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        super().__init__(torch, problem, sources)
        module = importlib.import_module("problem")
        self.get_inputs = module.get_inputs
        self.init_seed = int(problem.get("init_seed", 42))
        torch.manual_seed(self.init_seed)
        self.init_args = list(module.get_init_inputs())
        torch.manual_seed(self.init_seed)
        with torch.no_grad():
            self.model = module.Model(*self.init_args)
        if self.device == "cuda":
            self.model = self.model.to("cuda")

    def draw(self, workload: Workload, seed: int) -> list[Any]:
        self.torch.manual_seed(seed)
        return list(self.get_inputs())

    def reference(self, values: list[Any]) -> Any:
        return self.model(*values)

    def init(self, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            args = encode_args(self.init_args)
        except ValueError as exc:
            raise HarnessError(f"get_init_inputs(): {exc}") from exc
        return {**super().init(inputs, outputs), "init_seed": self.init_seed, "init_args": args}


def _combine(a: int, b: int) -> int:
    """GPU MODE's mix of a test's public seed with the run's secret one."""
    return int(a + (a + b) * (a + b + 1) // 2)


class _GpuMode(_Format):
    """`generate_input(**shape, seed=...)`, the shape's public seed combined with one drawn from
    the task's secret seed as GPU MODE's evaluator does; `ref_kernel(data)` on a copy."""

    convention = "gpumode"

    def __init__(self, torch: Any, problem: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        super().__init__(torch, problem, sources)
        self.sources = dict(sources)
        module = importlib.import_module("reference")
        self.generate_input = module.generate_input
        self.ref_kernel = module.ref_kernel
        self.structure: Any = None

    def draw(self, workload: Workload, seed: int) -> list[Any]:
        args = dict(workload.params)
        secret = seed % 2**31
        if "seed" in args:
            args["seed"] = _combine(int(args["seed"]), secret)
        self.torch.manual_seed(secret)
        structure, leaves = flatten(self.generate_input(**args), self.torch)
        if self.structure is None:
            self.structure = structure
        elif structure != self.structure:
            raise HarnessError(f"{workload.name}: generate_input returned data of another shape "
                               "of structure than the first workload's")  # fmt: skip
        return leaves

    def reference(self, values: list[Any]) -> Any:
        return self.ref_kernel(rebuild(self.structure, values))

    def init(self, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
        return {**super().init(inputs, outputs), "structure": self.structure,
                "modules": self.sources}  # fmt: skip


class _FlashInfer(_Format):
    """Inputs from the definition and the workload: a workload's scalars as given, the rest
    random as FlashInfer-Bench draws them (normal floats, float8 clamped to [-2, 2], integers in
    fixed ranges), from a generator seeded from the task's secret seed; `run(*inputs)`."""

    convention = "flashinfer"

    def __init__(self, torch: Any, problem: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        super().__init__(torch, problem, sources)
        self.definition = problem["definition"]
        self.run = importlib.import_module("reference").run

    def _shape(self, axes: Mapping[str, Any], names: Sequence[str]) -> list[int]:
        declared = self.definition["axes"]
        return [int(declared[a].get("value", axes.get(a, 0)))
                if declared[a].get("type") == "const" else int(axes[a]) for a in names]  # fmt: skip

    def _random(self, shape: list[int], dtype: str, gen: Any) -> Any:
        torch = self.torch
        kind = getattr(torch, dtype)
        if dtype in ("float32", "float16", "bfloat16", "float64"):
            return torch.randn(shape, dtype=kind, generator=gen)
        if dtype.startswith("float8"):
            return torch.randn(shape, generator=gen).clamp_(-2.0, 2.0).to(kind)
        if dtype == "bool":
            return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
        low, high = _INT_RANGES[dtype]
        return torch.randint(low, high, shape, dtype=kind, generator=gen)

    def draw(self, workload: Workload, seed: int) -> list[Any]:
        gen = self.torch.Generator().manual_seed(seed)
        given = workload.params.get("inputs", {})
        axes = workload.params.get("axes", {})
        values = []
        for name, spec in self.definition["inputs"].items():
            source = given.get(name, {"type": "random"})
            if source.get("type") == "scalar":
                values.append(source["value"])
            elif source.get("type", "random") != "random":
                raise HarnessError(f"{workload.name}: input {name} is {source['type']}: only "
                                   "random and scalar inputs can be drawn")  # fmt: skip
            elif spec.get("shape") is None:
                values.append(self._random([], spec["dtype"], gen).item())
            else:
                values.append(self._random(self._shape(axes, spec["shape"]), spec["dtype"], gen))
        return values

    def reference(self, values: list[Any]) -> Any:
        return self.run(*values)

    def init(self, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
        def tensors(kind: str) -> list[dict[str, Any]]:
            return [{"name": n, "dtype": s["dtype"], "shape": s.get("shape"),
                     "scalar": s.get("shape") is None}
                    for n, s in self.definition[kind].items()]  # fmt: skip

        axes = {n: a.get("value") if a.get("type") == "const" else None
                for n, a in self.definition["axes"].items()}  # fmt: skip
        return {"inputs": tensors("inputs"), "outputs": tensors("outputs"), "axes": axes}


_FORMATS: dict[str, type[_Format]] = {
    "kernelbench": _KernelBench,
    "gpumode": _GpuMode,
    "flashinfer": _FlashInfer,
}


class _Judge:
    """The Benchmark's three callables for one problem, on the slot's numpy arrays."""

    def __init__(self, torch: Any, np: Any, fmt: _Format, first: Workload) -> None:
        self.torch = torch
        self.np = np
        self.fmt = fmt
        leaves = fmt.draw(first, _PUBLIC_SEED)
        values = [v.to(fmt.device) if isinstance(v, torch.Tensor) else v for v in leaves]
        with torch.no_grad():
            result = fmt.reference(values)
        inputs = [_leaf_spec(leaf, torch) for leaf in leaves]
        self.init = fmt.init(inputs, _outputs_of(result, fmt, torch))
        self.adapter = Adapter(torch, self.init, copy_inputs=True, device=fmt.device)
        try:
            self.adapter.slot_tensor(result)
        except (TypeError, ValueError) as exc:
            raise HarnessError(f"the reference's own output: {exc}") from exc
        self.reference = self.adapter.numpy_call(fmt.reference)

    def _array(self, leaf: Any, spec: Mapping[str, Any] | None) -> Any:
        np, torch = self.np, self.torch
        if not isinstance(leaf, torch.Tensor):
            dtype = spec["dtype"] if spec else _leaf_spec(leaf, torch)["dtype"]
            return np.array([leaf], dtype=slot_dtype(dtype))
        tensor = leaf.detach().cpu()
        return np.ascontiguousarray(tensor.to(getattr(torch, slot_dtype(_name(tensor.dtype)))))

    def make_inputs(self, workload: Workload, rng: Any) -> tuple[Any, ...]:
        leaves = self.fmt.draw(workload, int(rng.integers(0, _SEED_RANGE)))
        specs = self.init["inputs"]
        if len(leaves) != len(specs):
            raise HarnessError(f"{workload.name}: {len(leaves)} inputs drawn, {len(specs)} "
                               "expected from the first draw")  # fmt: skip
        for leaf, spec in zip(leaves, specs, strict=True):
            if isinstance(leaf, self.torch.Tensor) and _name(leaf.dtype) != spec["dtype"]:
                raise HarnessError(f"{workload.name}: an input drawn as {_name(leaf.dtype)}, "
                                   f"{spec['dtype']} in the first draw")  # fmt: skip
        return tuple(self._array(leaf, spec) for leaf, spec in zip(leaves, specs, strict=True))

    def output(self, workload: Workload, inputs: tuple[Any, ...]) -> Output:
        out = self.reference(*inputs)
        return Output(tuple(out.shape), str(out.dtype))


def _outputs_of(result: Any, fmt: _Format, torch: Any) -> list[dict[str, Any]]:
    """The outputs the reference gave at start: `{name, dtype}` each."""
    if isinstance(fmt, _FlashInfer):
        return []  # declared by the definition
    items = list(result) if isinstance(result, tuple | list) else [result]
    outputs = []
    for number, item in enumerate(items):
        if type(item) is not torch.Tensor:
            raise HarnessError(f"the reference returned a {type(item).__name__}, not a tensor")
        outputs.append({"name": f"output{number}", "dtype": _name(item.dtype)})
    return outputs


def problem_benchmark(
    problem: Mapping[str, Any],
    sources: Mapping[str, str],
    *,
    numpy: Any = None,
    torch: Any = None,
) -> Benchmark:
    """The `Benchmark` of an imported problem: `problem` as `kz problems import` wrote it
    (format, entry, device, workloads, tolerances, and the format's own fields), `sources` the
    problem's files by module name."""
    fmt_name = str(problem.get("format"))
    if fmt_name not in _FORMATS:
        raise HarnessError(f"format must be one of {', '.join(FORMATS)}, got {fmt_name!r}")
    torch = torch if torch is not None else importlib.import_module("torch")
    np = numpy if numpy is not None else importlib.import_module("numpy")
    torch.set_num_threads(1)
    workloads = [Workload(w["name"], w.get("params", {})) for w in problem["workloads"]]
    if not workloads:
        raise HarnessError("a problem needs at least one workload")
    fmt = _FORMATS[fmt_name](torch, problem, sources)
    judge = _Judge(torch, np, fmt, workloads[0])
    make: Callable[[Workload, Any], tuple[Any, ...]] = judge.make_inputs
    return Benchmark(
        entry=str(problem["entry"]),
        workloads=workloads,
        make_inputs=make,
        reference=judge.reference,
        output=judge.output,
        dtype=str(problem.get("dtype", "fp32")),
        atol=float(problem["atol"]),
        rtol=float(problem["rtol"]),
        device=fmt.device,
        timing=Timing(**problem.get("timing", {})),
        framework="torch",
        convention=fmt.convention,
        init=judge.init,
    )
