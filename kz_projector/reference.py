"""Each board's pinned reference: the implementation every challenger is also measured beside.

A board (`arch/op_class/sub_class/quant`) pins the `src/` of its first kernel as that kernel's
first commit on main has it. Every judgement measures the pinned reference side by side with
the challenger, so each kernel's score is a speed-up over one fixed implementation, comparable
across runs, runners and time (JUDGING.md's "one reference per board").

The git projector pins it when it commits a kernel of a board that has none, and keeps it in
`KZ_JUDGES` under `reference_key(board)`: `reference/src/…` and `reference/PINNED.json` (the
kernel id and the source commit). Main's bundle of every kernel of the board carries the same
`reference/` folder, and a runner given a kernel that main does not hold yet gets the board's
object alone (`runner_bundle`). A replay into an empty store pins the same files: the first
commit of a board is a fact of the log. A store from before references were pinned gets its
pins at each board's next commit.
"""

from __future__ import annotations

import io
import json

from kz_events.errors import ObjectNotFound
from kz_events.ids import KernelId
from kz_events.port import LogPort
from kz_events.subjects import JUDGES_BUCKET, reference_key
from kz_package.archive import pack_files
from kz_package.judge import REFERENCE_DIR
from kz_package.memread import read_package_files
from kz_projector.gitstore import FileMap

__all__ = ["PINNED_FILE", "References", "reference_folder"]

PINNED_FILE = f"{REFERENCE_DIR}/PINNED.json"


def reference_folder(kernel_id: str, commit: str, files: FileMap) -> dict[str, tuple[int, bytes]]:
    """The `reference/` folder pinning `files`' `src/` (a kernel as `commit` has it)."""
    pinned = json.dumps({"kernel_id": kernel_id, "commit": commit}, sort_keys=True).encode()
    return {
        PINNED_FILE: (0o644, pinned + b"\n"),
        **{
            f"{REFERENCE_DIR}/{path}": entry
            for path, entry in files.items()
            if path.startswith("src/")
        },
    }


class References:
    """The pinned `reference/` folder of each board, read from `KZ_JUDGES` once and pinned
    there when a board has none."""

    def __init__(self, elog: LogPort) -> None:
        self.elog = elog
        self.known: dict[str, dict[str, tuple[int, bytes]]] = {}

    async def folder(
        self, kernel_id: str, commit: str | None, files: FileMap
    ) -> dict[str, tuple[int, bytes]]:
        """The board's `reference/` folder; pinned to `files` at `commit` (the kernel
        `kernel_id` as main now has it) when the board has none yet."""
        board = KernelId.parse(kernel_id).group
        known = self.known.get(board)
        if known is not None:
            return known
        try:
            stored = read_package_files(
                await self.elog.get_object_bytes(JUDGES_BUCKET, reference_key(board))
            )
        except ObjectNotFound:
            stored = {}
        if not stored and commit is not None:
            stored = reference_folder(kernel_id, commit, files)
            out = io.BytesIO()
            pack_files(stored, out)
            await self.elog.put_object(
                JUDGES_BUCKET, reference_key(board), out.getvalue(), replacing=True
            )
        self.known[board] = stored
        return stored

    async def pin(
        self, kernel_id: str, commit: str, files: FileMap
    ) -> dict[str, tuple[int, bytes]]:
        """Pin `files`' `src/` (kernel `kernel_id` as `commit` holds it) as its board's
        reference, replacing the one pinned before (a maintainer's `reference_pinned`)."""
        board = KernelId.parse(kernel_id).group
        folder = reference_folder(kernel_id, commit, files)
        out = io.BytesIO()
        pack_files(folder, out)
        await self.elog.put_object(
            JUDGES_BUCKET, reference_key(board), out.getvalue(), replacing=True
        )
        self.known[board] = folder
        return folder

    async def pinned_at(self, kernel_id: str) -> tuple[str, str] | None:
        """(kernel id, commit) the board of `kernel_id` is pinned to now, if it is."""
        pinned = (await self.folder(kernel_id, None, {})).get(PINNED_FILE)
        if pinned is None:
            return None
        doc = json.loads(pinned[1])
        return str(doc.get("kernel_id")), str(doc.get("commit"))
