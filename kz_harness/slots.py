"""The judge's side of the slots: one worker's sealed shared memory for one workload, and the
fresh inputs of one window.

Every worker (candidate, incumbent, reference, the trusted no-op) gets its own file of slots,
written from the same pristine arrays (`Draw`), so no implementation can reach another's
inputs. Before a window the judge writes each slot's own inputs and poisons its output region;
after it, it copies the outputs at once (a later write is `late_output`), compares every
slot's inputs with the pristine copies, and checks every output cheaply (no poison or NaN
left). All of it is one numpy pass per array over the window's slots.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from kz_harness.channel import ArraySpec, SlotLayout, c_strides, new_shared_memory

__all__ = ["POISON_BYTE", "Draw", "SlotSet", "poison"]

POISON_BYTE = 0xA5


def poison(np: Any, out: Any) -> None:
    """Fill an output region with what no honest kernel returns before the call."""
    if out.dtype.kind in "fc":
        out.fill(np.nan)
    else:
        out.view(np.uint8).fill(POISON_BYTE)


_CHUNK_BYTES = 8 << 20  # the most a comparison's temporaries may take at once


class Draw:
    """One window's fresh inputs: each input of every call stacked as (call, *shape), drawn
    from the task's secret seed; the reference and the checks read them, never a worker.

    `Draw(np, calls)` stacks the calls' arrays; `Draw.filled(np, buffers, count)` takes the
    first `count` calls of buffers the judge fills in place, window after window (a fresh
    stack of tens of MiB per window would cost the judge as many page faults)."""

    def __init__(self, np: Any, calls: Sequence[tuple[Any, ...]]) -> None:
        if not calls:
            raise ValueError("a window needs at least one call's inputs")
        arrays = tuple(np.stack([inputs[j] for inputs in calls]) for j in range(len(calls[0])))
        self._set(np, arrays, len(calls))

    @classmethod
    def filled(cls, np: Any, buffers: Sequence[Any], count: int) -> Draw:
        draw = cls.__new__(cls)
        draw._set(np, tuple(buffer[:count] for buffer in buffers), count)
        return draw

    def _set(self, np: Any, arrays: tuple[Any, ...], count: int) -> None:
        self.count = count
        self.arrays = arrays
        self.raw = tuple(a.reshape(count, -1).view(np.uint8) for a in arrays)

    def call(self, index: int) -> tuple[Any, ...]:
        """The inputs of call `index`."""
        return tuple(array[index] for array in self.arrays)


class SlotSet:
    """One worker's slots for one workload, mapped in the judge: typed views (slot, *shape)
    to write and copy, and byte views (slot, nbytes) to compare."""

    def __init__(self, np: Any, layout: SlotLayout) -> None:
        self.np = np
        self.layout = layout
        self.fd, self.memory = new_shared_memory(layout.size)
        self.inputs = [self._typed(spec) for spec in layout.inputs]
        self.inputs_raw = [self._raw(spec) for spec in layout.inputs]
        self.output = self._typed(layout.output)
        self.output_raw = self._raw(layout.output)
        self.finite = self.output.dtype.kind in "fc"
        self._copies: Any = None  # the outputs as each window ended (grown as windows grow)
        self._last: Any = None  # the byte copies of the last window's outputs

    def _typed(self, spec: ArraySpec) -> Any:
        np = self.np
        return np.ndarray(
            (self.layout.count, *spec.shape),
            dtype=np.dtype(spec.dtype),
            buffer=self.memory,
            offset=spec.offset,
            strides=(spec.stride, *c_strides(spec.shape, spec.itemsize)),
        )

    def _raw(self, spec: ArraySpec) -> Any:
        np = self.np
        return np.ndarray(
            (self.layout.count, spec.nbytes),
            dtype=np.uint8,
            buffer=self.memory,
            offset=spec.offset,
            strides=(spec.stride, 1),
        )

    def release_fd(self) -> None:
        """Close the judge's descriptor once the worker has its own (the mapping stays)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def prepare(self, draw: Draw) -> bool:
        """Write the window's inputs into the first `draw.count` slots and poison their
        outputs. True when an output changed after the last window's copy (`late_output`)."""
        late = self.late()
        n = draw.count
        for view, array in zip(self.inputs, draw.arrays, strict=True):
            view[:n] = array
        poison(self.np, self.output[:n])
        return late

    def collect(self, count: int) -> Any:
        """A copy of the outputs of the window's `count` slots, taken as it ends (valid until
        this slot set's next window)."""
        if self._copies is None or len(self._copies) < count:
            self._copies = self.np.empty_like(self.output[:count])
        got = self._copies[:count]
        self.np.copyto(got, self.output[:count])
        self._last = got.reshape(count, -1).view(self.np.uint8)
        return got

    def late(self) -> bool:
        """Whether an output slot changed after the last window's outputs were copied."""
        if self._last is None:
            return False
        return bool(_differing(self.np, self.output_raw[: len(self._last)], self._last))

    def changed(self, draw: Draw) -> list[int]:
        """The calls of the window whose inputs differ from the pristine copies (bitwise)."""
        found: set[int] = set()
        for view, pristine in zip(self.inputs_raw, draw.raw, strict=True):
            found.update(_differing(self.np, view[: draw.count], pristine))
        return sorted(found)

    def unfinished(self, got: Any) -> list[int]:
        """The calls whose output holds NaN or Inf, or (integers) is still the poison."""
        np = self.np
        count = len(got)
        if count == 0 or math.prod(got.shape[1:]) == 0:
            return []
        rows = got.reshape(count, -1)
        found = []
        for part in _parts(count, rows[0].nbytes):
            if self.finite:
                ok = np.isfinite(rows[part]).all(axis=1)
            else:
                ok = ~(rows[part].view(np.uint8) == POISON_BYTE).all(axis=1)
            found += [part.start + int(i) for i in np.flatnonzero(~ok)]
        return found


def _parts(rows: int, row_bytes: int) -> list[slice]:
    """Slices of rows whose temporaries stay within `_CHUNK_BYTES`."""
    step = max(1, _CHUNK_BYTES // max(row_bytes, 1))
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]


def _differing(np: Any, a: Any, b: Any) -> list[int]:
    """The rows where two (rows, nbytes) byte arrays differ."""
    found = []
    for part in _parts(len(a), a.shape[1] if a.ndim > 1 else 1):
        if not np.array_equal(a[part], b[part]):
            found += [part.start + int(i) for i in np.flatnonzero((a[part] != b[part]).any(axis=1))]
    return found
