"""Identifier value types: the kernel id grammar, architectures, digests and submission ids."""

from __future__ import annotations

import uuid

import pytest

from kz_events.errors import InvalidInput, InvalidKernelId
from kz_events.ids import (
    KernelId,
    new_submission_id,
    parse_arch,
    parse_digest,
    parse_submission_id,
)

pytestmark = pytest.mark.unit

VALID = [
    "sm90/Attention/MHA/fp16/flash_v3",
    "gfx928/GEMM/dense/fp8/tile_256x128",
    "cpu/Norm/RMSNorm/fp32/numpy_ref",
    "sm_9.0/a/b/c/d",
    "0/1/2/3/4",
    "a/b-c/d+e/f.g/h_i",
    "/".join(["x" * 64] * 5),
]

INVALID = [
    ("", "five segments"),
    ("sm90/Attention/MHA/fp16", "five segments"),
    ("sm90/Attention/MHA/fp16/flash/extra", "five segments"),
    ("sm90//MHA/fp16/flash", "op_class"),
    ("sm90/Attention/MHA/fp16/", "name"),
    ("/Attention/MHA/fp16/flash", "arch"),
    ("sm90/./MHA/fp16/flash", "op_class"),
    ("sm90/../MHA/fp16/flash", "op_class"),
    ("sm90/.hidden/MHA/fp16/flash", "op_class"),
    ("sm90/Attention/-MHA/fp16/flash", "sub_class"),
    ("sm90/Attention/MHA/fp 16/flash", "quant"),
    ("sm90/Attention/MHA/fp16/flash*", "name"),
    ("sm90/Attention/MHA/fp16/fläsh", "name"),
    ("sm90/Attention/MHA/fp16/" + "x" * 65, "name"),
    ("sm90\\Attention\\MHA\\fp16\\flash", "five segments"),
]


@pytest.mark.parametrize("text", VALID)
def test_valid_kernel_ids_parse_and_print_back(text: str) -> None:
    """A valid kernel id parses into five parts and prints back unchanged."""
    kid = KernelId.parse(text)
    assert str(kid) == text
    assert kid.parts == tuple(text.split("/"))


@pytest.mark.parametrize(("text", "names"), INVALID)
def test_invalid_kernel_ids_are_refused_naming_the_problem(text: str, names: str) -> None:
    """An invalid kernel id raises InvalidKernelId whose message names what is wrong."""
    with pytest.raises(InvalidKernelId) as caught:
        KernelId.parse(text)
    assert names in caught.value.message
    assert caught.value.code == "invalid_kernel_id"
    assert isinstance(caught.value, InvalidInput)


@pytest.mark.parametrize(
    "text",
    [
        "sm90%2FAttention%2FMHA%2Ffp16%2Fflash_v3",
        "sm90%2fAttention%2fMHA%2ffp16%2fflash_v3",
        "sm90/Attention%2FMHA/fp16%2Fflash_v3",
    ],
)
def test_percent_2f_form_is_accepted(text: str) -> None:
    """The %2F-encoded form (either case) parses to the same id as the raw form."""
    assert KernelId.parse(text) == KernelId.parse("sm90/Attention/MHA/fp16/flash_v3")


def test_non_string_kernel_id_is_refused() -> None:
    """A kernel id that is not a string is refused with the type it got."""
    with pytest.raises(InvalidKernelId, match="int"):
        KernelId.parse(42)  # type: ignore[arg-type]


def test_direct_construction_validates_segments() -> None:
    """Building a KernelId from parts checks every segment too."""
    with pytest.raises(InvalidKernelId, match="quant"):
        KernelId("sm90", "Attention", "MHA", "fp/16", "flash")


def test_group_and_repo_path() -> None:
    """`group` is the first four segments and `repo_path` the whole id, both joined by `/`."""
    kid = KernelId.parse("sm90/Attention/MHA/fp16/flash_v3")
    assert kid.group == "sm90/Attention/MHA/fp16"
    assert kid.repo_path == "sm90/Attention/MHA/fp16/flash_v3"
    assert (kid.arch, kid.op_class, kid.sub_class, kid.quant, kid.name) == kid.parts


def test_kernel_ids_are_hashable_and_ordered() -> None:
    """Kernel ids are values: equal ids hash alike and ids sort by their segments."""
    a = KernelId.parse("sm90/A/B/fp16/a")
    b = KernelId.parse("sm90/A/B/fp16/b")
    assert len({a, KernelId.parse(str(a))}) == 1
    assert sorted([b, a]) == [a, b]


@pytest.mark.parametrize("text", ["sm90", "gfx928", "cpu", "sm_9.0"])
def test_valid_arch(text: str) -> None:
    """A valid architecture parses to itself."""
    assert parse_arch(text) == text


@pytest.mark.parametrize("text", ["", "sm90/x", ".sm90", "sm 90", "x" * 65])
def test_invalid_arch(text: str) -> None:
    """An invalid architecture raises InvalidInput with code invalid_arch."""
    with pytest.raises(InvalidInput) as caught:
        parse_arch(text)
    assert caught.value.code == "invalid_arch"


def test_digest_grammar() -> None:
    """A digest is exactly 64 lowercase hex characters."""
    good = "0123456789abcdef" * 4
    assert parse_digest(good) == good
    for bad in ["", good[:-1], good + "0", good.upper(), "g" * 64]:
        with pytest.raises(InvalidInput, match="64 lowercase hex"):
            parse_digest(bad)


def test_submission_ids_are_uuids() -> None:
    """Submission ids parse from any UUID spelling into the canonical lowercase form."""
    value = uuid.uuid4()
    assert parse_submission_id(str(value).upper()) == str(value)
    assert uuid.UUID(new_submission_id()).version == 4
    assert new_submission_id() != new_submission_id()


@pytest.mark.parametrize("text", ["", "not-a-uuid", "1234"])
def test_bad_submission_id(text: str) -> None:
    """A submission id that is not a UUID raises InvalidInput with code unknown_submission."""
    with pytest.raises(InvalidInput) as caught:
        parse_submission_id(text)
    assert caught.value.code == "unknown_submission"
