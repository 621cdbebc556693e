"""The narrow channel between the judge and a candidate worker, and the judge's control line.

Both are Unix `SOCK_SEQPACKET` sockets, so every message is one packet: an operation byte and
its payload. Arrays never travel in messages: they live in *slots*, laid out in a
shared-memory file (`memfd`) that the judge creates for each worker and each workload and
sends once as a file descriptor, sealed so that no worker can grow or shrink it. A CALLS
message names the slots of one timed window; the worker makes one call per slot, reading the
inputs and writing the output there, and answers once.

The judge owns every slot and the only copy of the secret inputs; a worker gets a socket end
and its own slots' descriptor, nothing else. This module is shared by both sides and imports
the standard library only.
"""

from __future__ import annotations

import fcntl
import json
import math
import mmap
import os
import socket
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kz_harness.errors import HarnessError

__all__ = [
    "ALIGN",
    "MAX_MESSAGE",
    "ArraySpec",
    "Channel",
    "ChannelClosed",
    "Op",
    "SlotLayout",
    "c_strides",
    "decode_json",
    "make_slots",
    "new_shared_memory",
    "slot_bytes",
    "slot_indices",
]

MAX_MESSAGE = 64 * 1024
MAX_FDS = 16
ALIGN = 64  # every array in a slot starts on a cache line
_SLOT_INDEX = "<{}I"
# A worker may write into its slots but never resize them: shrinking one would fault the
# judge's mapping, and a size is a channel between processes that share the descriptor.
_SEALS = fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL


class Op:
    """Operation bytes. judge -> worker: LOAD, SLOTS, CALLS (one timed window: a call in each
    slot named, answered by one DONE), EXIT, CEILINGS (the calibration worker's measured
    ceilings, answered by an OK carrying them); worker -> judge: OK, DONE, ERROR. judge ->
    runner (control): SPAWN, STOP, CONT, INSPECT, KILL; runner -> judge: OK, ERROR."""

    LOAD = 1
    SLOTS = 2
    CALLS = 3
    EXIT = 4
    CEILINGS = 5
    OK = 10
    DONE = 11
    ERROR = 12
    SPAWN = 20
    STOP = 21
    CONT = 22
    INSPECT = 23
    KILL = 24


class ChannelClosed(HarnessError):
    """The other end of the channel is gone (the process died or closed it)."""


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """One array of every slot: its dtype name (numpy's, e.g. float32) and shape, where the
    first slot's copy starts and the bytes from one slot's copy to the next (`stride`)."""

    dtype: str
    shape: tuple[int, ...]
    offset: int = 0
    itemsize: int = 0
    stride: int = 0

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize

    def at(self, slot: int) -> int:
        """The byte offset of slot `slot`'s copy of this array."""
        return self.offset + slot * self.stride

    def to_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype,
            "shape": list(self.shape),
            "offset": self.offset,
            "stride": self.stride,
        }


@dataclass(frozen=True, slots=True)
class SlotLayout:
    """Where each of `count` slots holds a call's inputs and its output, and the file's size.

    Each array's copies lie side by side (all slots' first input, then all slots' second, ...,
    then all outputs), so the judge writes, compares and copies a window's arrays in one pass
    each."""

    inputs: tuple[ArraySpec, ...]
    output: ArraySpec
    count: int
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": [spec.to_dict() for spec in self.inputs],
            "output": self.output.to_dict(),
            "count": self.count,
            "size": self.size,
        }


def _aligned(offset: int, to: int = ALIGN) -> int:
    return (offset + to - 1) // to * to


def make_slots(
    inputs: Sequence[tuple[str, tuple[int, ...], int]],
    output: tuple[str, tuple[int, ...], int],
    count: int = 1,
) -> SlotLayout:
    """Lay out `count` slots of (dtype, shape, itemsize) inputs and an output, every copy of
    every array cache-line aligned; the size is whole pages."""
    if count < 1:
        raise HarnessError(f"a slot layout needs at least one slot, got {count}")
    offset = 0
    specs = []
    for dtype, shape, itemsize in (*inputs, output):
        nbytes = math.prod(shape) * itemsize
        stride = _aligned(max(nbytes, 1))
        specs.append(ArraySpec(dtype, tuple(shape), offset, itemsize, stride))
        offset = _aligned(offset + count * stride)
    return SlotLayout(tuple(specs[:-1]), specs[-1], count, _aligned(offset, mmap.PAGESIZE))


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-contiguous array of `shape`."""
    strides = []
    step = itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


def slot_bytes(
    inputs: Sequence[tuple[str, tuple[int, ...], int]], output: tuple[str, tuple[int, ...], int]
) -> int:
    """What one more slot of these arrays costs in a layout."""
    return sum(_aligned(max(math.prod(shape) * size, 1)) for _, shape, size in (*inputs, output))


def new_shared_memory(size: int, name: str = "kz-slot") -> tuple[int, mmap.mmap]:
    """A fresh memfd of `size` bytes, sealed against growing and shrinking (and against any
    further seal), and the judge's own mapping of it."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        return fd, mmap.mmap(fd, size)
    except OSError:
        os.close(fd)
        raise


class Channel:
    """One end of a SEQPACKET socket: whole messages of an operation byte and a payload."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    @classmethod
    def from_fd(cls, fd: int) -> Channel:
        return cls(socket.socket(fileno=fd))

    def send(self, op: int, payload: bytes = b"", fds: Sequence[int] = ()) -> None:
        if len(payload) + 1 > MAX_MESSAGE:
            raise HarnessError(f"message of {len(payload)} bytes is over {MAX_MESSAGE}")
        data = bytes((op,)) + payload
        try:
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.send(data)
        except OSError as exc:
            raise ChannelClosed(f"the other end is gone: {exc}") from exc

    def send_json(self, op: int, document: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        self.send(op, json.dumps(document, separators=(",", ":")).encode(), fds)

    def send_calls(self, slots: Sequence[int]) -> None:
        """Start one window: a call in each of `slots`, in order."""
        self.send(Op.CALLS, struct.pack(_SLOT_INDEX.format(len(slots)), *slots))

    def receive(self) -> tuple[int, bytes, list[int]]:
        """The next message as (op, payload, received fds); ChannelClosed at end of stream."""
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_MESSAGE, MAX_FDS)
        except OSError as exc:
            raise ChannelClosed(f"the other end is gone: {exc}") from exc
        if not data:
            for fd in fds:
                os.close(fd)
            raise ChannelClosed("the other end closed the channel")
        return data[0], data[1:], fds

    def receive_op(self) -> tuple[int, bytes]:
        """The next message without descriptors (any that came are closed)."""
        try:
            data = self.sock.recv(MAX_MESSAGE)
        except OSError as exc:
            raise ChannelClosed(f"the other end is gone: {exc}") from exc
        if not data:
            raise ChannelClosed("the other end closed the channel")
        return data[0], data[1:]

    def close(self) -> None:
        self.sock.close()


def slot_indices(payload: bytes) -> tuple[int, ...]:
    """The slots a CALLS names, in order."""
    if len(payload) % 4:
        raise HarnessError(f"a CALLS message of {len(payload)} bytes names no whole slots")
    return struct.unpack(_SLOT_INDEX.format(len(payload) // 4), payload)


def decode_json(payload: bytes) -> dict[str, Any]:
    """A JSON object payload; HarnessError for anything else."""
    try:
        document = json.loads(payload)
    except ValueError as exc:
        raise HarnessError(f"channel message is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise HarnessError("channel message must be a JSON object")
    return document
