"""The judge <-> worker channel's cost per call, beside a raw socket and a copying pipe.

The judge side is `kz_harness.link.Link` over `kz_harness.channel` (a SEQPACKET socket and a
sealed shared-memory file of slots laid out by `make_slots`); the worker is the real
`kz_harness.worker` (`python -I kz_harness/launch.py worker`, its environment from
`kz_runner.supervisor.worker_environment`) serving the trusted no-op `@calibrate` entry, and
both processes are pinned to one CPU as the judge does. One round trip is a window of one
call: the CALLS message, the worker's fresh views over the slot and the no-op's checks, the
DONE message. It is measured for inputs of 4 KiB, 1 MiB and 16 MiB (float32) with a 64-byte
output ("input only": the inputs cost no copies), and with an output as large as the input
("output = input", what an element-wise board like RMSNorm declares). Beside each, the
resolution the judge records: the no-op's per-call figure in windows of `--batch` calls, where
the round trip is paid once per window.

Side by side, between two processes pinned the same way: a raw `socket.socketpair
(SOCK_SEQPACKET)` ping-pong of one byte (the floor of any message round trip), and a pipe
carrying the input array to the other process, which reads it all and answers one byte (what
a channel that copies inputs would cost; the pipe enlarged to /proc/sys/fs/pipe-max-size).
Each figure is the median and p90 of up to `--calls` round trips after `--warmup` untimed
ones, at most `--budget` seconds each.

    .venv/bin/python bench/judge_channel.py [--calls 3000] [--warmup 200] [--budget 2]
                                            [--batch 64]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from kz_harness.channel import Channel, Op, make_slots
from kz_harness.judge import Timing
from kz_harness.link import Link
from kz_harness.slots import SlotSet
from kz_harness.stats import percentile
from kz_harness.worker import CALIBRATE
from kz_runner.supervisor import worker_environment

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "kz_harness" / "launch.py"
SIZES = (("4 KiB", 4 << 10), ("1 MiB", 1 << 20), ("16 MiB", 16 << 20))
SMALL_OUTPUT = 16  # float32 elements: 64 bytes
Pair = tuple[float, float]  # a median and a p90, in us
_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)

# The baseline's other process: pinned to the judge's CPU; 'P' + count echoes that many
# one-byte packets; 'C' + size + count reads that many arrays of `size` bytes from the pipe,
# answering one byte after each; anything else ends it.
ECHO = r"""
import os, socket, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
sock = socket.socket(fileno=int(sys.argv[2]))
data = int(sys.argv[3])
while True:
    order = sock.recv(64)
    if order[:1] == b"P":
        for _ in range(int(order[1:])):
            sock.send(sock.recv(16))
    elif order[:1] == b"C":
        size, count = (int(part) for part in order[1:].split(b","))
        buffer = memoryview(bytearray(size))
        for _ in range(count):
            got = 0
            while got < size:
                got += os.readv(data, [buffer[got:]])
            sock.send(b"k")
    else:
        break
"""


def _summary(samples_ns: list[float]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    return percentile(ordered, 0.5) / 1e3, percentile(ordered, 0.9) / 1e3


def _timed(one: Callable[[], float], calls: int, warmup: int, budget_s: float) -> list[float]:
    """Round trips in ns: `warmup` untimed, then up to `calls` within `budget_s` (20 at least)."""
    for _ in range(warmup):
        one()
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < calls and (len(samples) < 20 or time.perf_counter() - started < budget_s):
        samples.append(one())
    return samples


@contextlib.contextmanager
def judge_worker(cpu: int) -> Iterator[Link]:
    """The real worker, started as the supervisor starts one (minus the sandbox), serving
    `@calibrate` on `cpu`; the judge's `Link` to it."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    worker = subprocess.Popen(
        [sys.executable, "-I", str(LAUNCH), "worker"],
        env=worker_environment(theirs.fileno()),
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    link = Link("calibrate", 0, Channel(ours), timeout_s=30.0)
    try:
        link.request(Op.LOAD, {"entry": CALIBRATE, "cpu": cpu, "device": "cpu"})
        yield link
        link.channel.send(Op.EXIT)
    finally:
        ours.close()
        worker.wait(10)


def judge_round_trips(
    link: Link,
    nbytes: int,
    output_elements: int,
    calls: int,
    warmup: int,
    budget_s: float,
    batch: int = 1,
) -> list[float]:
    """The judge's wall time per no-op call, one float32 input of `nbytes`, in windows of
    `batch` calls (one: the round trip with one call in it)."""
    count = max(batch, 2)
    layout = make_slots(
        [("float32", (nbytes // 4,), 4)], ("float32", (output_elements,), 4), count=count
    )
    slots = SlotSet(np, layout)
    slots.inputs[0][...] = np.arange(nbytes // 4, dtype=np.float32)
    link.request(Op.SLOTS, layout.to_dict(), [slots.fd])
    slots.release_fd()
    counter = iter(range(1 << 62))

    def one() -> float:
        first = next(counter) % 2 if batch == 1 else 0
        return link.window(range(first, first + batch))[0] / batch

    return _timed(one, calls, warmup, budget_s)


class Baseline:
    """The other process of the baselines, pinned to `cpu`: a raw SEQPACKET socket to it and
    a pipe into it."""

    def __init__(self, cpu: int) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        read_end, self.data = os.pipe()
        self.pipe_bytes = 1 << 16
        with contextlib.suppress(OSError):
            limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
            self.pipe_bytes = fcntl.fcntl(self.data, _SETPIPE_SZ, limit)
        argv = [sys.executable, "-I", "-c", ECHO, str(cpu), str(theirs.fileno()), str(read_end)]
        self.process = subprocess.Popen(argv, pass_fds=(theirs.fileno(), read_end))
        theirs.close()
        os.close(read_end)

    def ping_pong(self, calls: int, warmup: int, budget_s: float) -> list[float]:
        sock = self.sock
        # The echo loop must know how many packets to answer: enough for any stopping point.
        sock.send(b"P%d" % (warmup + calls))
        answered = [0]

        def one() -> float:
            begin = time.perf_counter_ns()
            sock.send(b"x")
            sock.recv(16)
            answered[0] += 1
            return float(time.perf_counter_ns() - begin)

        samples = _timed(one, calls, warmup, budget_s)
        for _ in range(warmup + calls - answered[0]):  # let the echo loop finish its count
            sock.send(b"x")
            sock.recv(16)
        return samples

    def pipe_copy(self, nbytes: int, calls: int, warmup: int, budget_s: float) -> list[float]:
        sock, data = self.sock, self.data
        payload = memoryview(np.arange(nbytes // 4, dtype=np.float32).view(np.uint8))

        # One array per order, so the other side always knows what comes (no early stop).
        def one() -> float:
            sock.send(b"C%d,1" % nbytes)
            begin = time.perf_counter_ns()
            sent = 0
            while sent < nbytes:
                sent += os.write(data, payload[sent:])
            sock.recv(16)
            return float(time.perf_counter_ns() - begin)

        return _timed(one, calls, warmup, budget_s)

    def close(self) -> None:
        self.sock.send(b"X")
        self.sock.close()
        os.close(self.data)
        self.process.wait(10)


def main(calls: int, warmup: int, budget_s: float, batch: int) -> None:
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})  # as the judge does; its worker pins itself on LOAD
    baseline = Baseline(cpu)
    try:
        ping = _summary(baseline.ping_pong(calls, warmup, budget_s))
        rows: list[tuple[str, Pair, Pair, Pair, tuple[int, float, float]]] = []
        with judge_worker(cpu) as link:
            for label, nbytes in SIZES:
                trips = judge_round_trips(link, nbytes, SMALL_OUTPUT, calls, warmup, budget_s)
                trips_full = judge_round_trips(link, nbytes, nbytes // 4, calls, warmup, budget_s)
                copies = baseline.pipe_copy(nbytes, calls, warmup, budget_s)
                fits = max(1, min(batch, Timing().slot_bytes // (2 * nbytes)))
                windows = max(calls // fits, 20)
                calls_in_windows = judge_round_trips(
                    link, nbytes, nbytes // 4, windows, 3, budget_s, batch=fits
                )
                rows.append(
                    (label, _summary(trips), _summary(trips_full), _summary(copies),
                     (fits, *_summary(calls_in_windows)))
                )  # fmt: skip
    finally:
        baseline.close()
    print(f"judge and worker pinned to CPU {cpu}; pipe buffer {baseline.pipe_bytes >> 10} KiB")
    print(f"raw SEQPACKET ping-pong, 1 byte: median {ping[0]:.1f} us p90 {ping[1]:.1f} us")
    for label, small, full, copy, per_call in rows:
        print(
            f"{label} input, 64 B output: judge round trip median {small[0]:.1f} us "
            f"p90 {small[1]:.1f} us | raw ping-pong median {ping[0]:.1f} us "
            f"({small[0] / ping[0]:.2f}x) | pipe copy of the input median {copy[0]:.1f} us "
            f"p90 {copy[1]:.1f} us ({small[0] / copy[0]:.3f}x)"
        )
        print(
            f"{label} input, output = input: judge round trip median {full[0]:.1f} us "
            f"p90 {full[1]:.1f} us ({full[0] / ping[0]:.2f}x ping-pong, "
            f"{full[0] / copy[0]:.3f}x pipe copy)"
        )
        print(
            f"{label} input, output = input, windows of {per_call[0]} calls (as many as the "
            f"slots' memory budget allows, at most --batch): resolution (the no-op's per-call "
            f"figure) median {per_call[1]:.2f} us p90 {per_call[2]:.2f} us"
        )
    one_mib = next(small for label, small, *_ in rows if label == "1 MiB")
    verdict = "PASS" if one_mib[0] < 20 else "MISS"
    print(
        f"channel round trip for a 1 MiB input: median {one_mib[0]:.1f} us "
        f"p90 {one_mib[1]:.1f} us (target < 20 us: {verdict})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="timed round trips per figure")
    parser.add_argument("--warmup", type=int, default=200, help="untimed round trips first")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per figure, at most")
    parser.add_argument("--batch", type=int, default=64, help="calls per window for resolution")
    args = parser.parse_args()
    main(args.calls, args.warmup, args.budget, args.batch)
