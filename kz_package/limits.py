"""The limits a package must fit: settings with the defaults CONTRACTS.md names."""

from __future__ import annotations

import msgspec

__all__ = ["MIB", "Limits"]

MIB = 1024 * 1024


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on a submission tarball and the files in it.

    `max_ratio` is unpacked bytes over compressed bytes; it is checked while streaming once
    more than `ratio_floor_bytes` have been unpacked, so tiny, very compressible packages pass.
    """

    max_entries: int = 2000
    max_file_bytes: int = 16 * MIB
    max_compressed_bytes: int = 32 * MIB
    max_unpacked_bytes: int = 256 * MIB
    max_ratio: int = 100
    ratio_floor_bytes: int = 1 * MIB
    max_yaml_bytes: int = 1 * MIB
    max_yaml_depth: int = 64
    max_result_bytes: int = 8 * MIB
