"""The narrow channel between the judge and a candidate worker, and the judge's control line.

Both are Unix `SOCK_SEQPACKET` sockets, so every message is one packet: an operation byte and
its payload. Arrays never travel in messages: they live in *slots*, shared-memory files
(`memfd`) that the judge creates and sends once per workload as file descriptors. A call
message names a slot; the worker reads the inputs and writes the output there.

The judge owns every slot and the only copy of the secret inputs; a worker gets a socket end
and the slots' descriptors, nothing else. This module is shared by both sides and imports the
standard library only.
"""

from __future__ import annotations

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
    "make_slot",
]

MAX_MESSAGE = 64 * 1024
MAX_FDS = 16
ALIGN = 64  # every array in a slot starts on a cache line
_SLOT_INDEX = struct.Struct("<I")


class Op:
    """Operation bytes. judge -> worker: LOAD, SLOTS, CALL, EXIT, CEILINGS (the calibration
    worker's measured ceilings, answered by an OK carrying them); worker -> judge: OK, DONE,
    ERROR. judge -> runner (control): SPAWN, STOP, CONT, INSPECT, KILL; runner -> judge: OK,
    ERROR."""

    LOAD = 1
    SLOTS = 2
    CALL = 3
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
    """One array of a slot: its dtype name (numpy's, e.g. float32), shape and byte offset."""

    dtype: str
    shape: tuple[int, ...]
    offset: int = 0
    itemsize: int = 0

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "offset": self.offset}


@dataclass(frozen=True, slots=True)
class SlotLayout:
    """Where a call's inputs and its output lie in one slot, and the slot's size."""

    inputs: tuple[ArraySpec, ...]
    output: ArraySpec
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": [spec.to_dict() for spec in self.inputs],
            "output": self.output.to_dict(),
            "size": self.size,
        }


def _aligned(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


def make_slot(
    inputs: Sequence[tuple[str, tuple[int, ...], int]], output: tuple[str, tuple[int, ...], int]
) -> SlotLayout:
    """Lay out (dtype, shape, itemsize) inputs then the output, each cache-line aligned."""
    offset = 0
    specs = []
    for dtype, shape, itemsize in (*inputs, output):
        spec = ArraySpec(dtype, tuple(shape), offset, itemsize)
        specs.append(spec)
        offset = _aligned(offset + spec.nbytes)
    return SlotLayout(tuple(specs[:-1]), specs[-1], max(offset, mmap.PAGESIZE))


def new_shared_memory(size: int, name: str = "kz-slot") -> tuple[int, mmap.mmap]:
    """A fresh memfd of `size` bytes and the judge's own mapping of it."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
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

    def send_call(self, slot: int) -> None:
        self.send(Op.CALL, _SLOT_INDEX.pack(slot))

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


def slot_index(payload: bytes) -> int:
    """The slot a CALL names."""
    return int(_SLOT_INDEX.unpack(payload)[0])


def decode_json(payload: bytes) -> dict[str, Any]:
    """A JSON object payload; HarnessError for anything else."""
    try:
        document = json.loads(payload)
    except ValueError as exc:
        raise HarnessError(f"channel message is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise HarnessError("channel message must be a JSON object")
    return document
