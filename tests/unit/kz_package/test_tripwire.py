"""The static tripwire: each pattern it watches for is hit, honest kernels are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_package.tripwire import (
    CODES,
    MAX_FILE_BYTES,
    MAX_HITS,
    MAX_TOTAL_BYTES,
    scan_files,
    scan_package,
)

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

# (source of src/kernel.py, the code it must hit)
PYTHON_CASES = [
    ("import sys\nf = sys._getframe(1)\n", "frame_walking"),
    ("import inspect\n", "frame_walking"),
    (
        "def k(e):\n    return e.__traceback__.tb_frame\n",
        "frame_walking",
    ),
    ("def k(g):\n    return g.gi_frame\n", "frame_walking"),
    ("def k(f):\n    return f.f_back.f_globals\n", "frame_walking"),
    ("def k(fn):\n    return fn.__globals__\n", "frame_walking"),
    ("def k(fn, other):\n    fn.__code__ = other.__code__\n", "code_edit"),
    ("import gc\n", "gc"),
    ("from gc import get_objects\n", "gc"),
    ("import ctypes\n", "ctypes"),
    ("import cffi\n", "ctypes"),
    ("import os\nos._exit(0)\n", "early_exit"),
    ("def k(t):\n    return {t.data_ptr(): t}\n", "address_read"),
    ("from os import _exit\n", "early_exit"),
    ("import atexit\n", "atexit"),
    ("import weakref\nweakref.finalize(object(), print)\n", "atexit"),
    ("import signal\n", "signal"),
    ("import os\nos.fork()\n", "process"),
    ("import subprocess\n", "process"),
    ("import multiprocessing\n", "process"),
    ("import os\nos.system('true')\n", "process"),
    ("import os as o\no.posix_spawn('/bin/true', [], {})\n", "process"),
    ("from os import system\n", "process"),
    ("import threading\n", "thread"),
    ("import _thread\n", "thread"),
    ("from concurrent.futures import ThreadPoolExecutor\n", "thread"),
    ("import asyncio\n", "thread"),
    ("import sys\nsys.modules['yaml'] = None\n", "sys_modules"),
    ("import builtins\nbuiltins.print = None\n", "builtins"),
    ("__builtins__['open'] = None\n", "builtins"),
    ("m = __import__('o' + 's')\n", "dynamic_import"),
    ("import importlib\n", "dynamic_import"),
    ("exec('x = 1')\n", "dynamic_code"),
    ("import os\nseed = os.environ.get('KZ_SEED')\n", "env_access"),
    ("import os\nfor name in os.environ:\n    pass\n", "env_access"),
    ("import os\nallv = dict(os.environ.items())\n", "env_access"),
    ("import os\nos.environ.pop('KZ_BASELINE_PATH')\n", "env_access"),
    ("import os\nv = os.getenv(''.join(['K', 'Z']))\n", "env_access"),
    ("open('bench_result.yaml', 'w').write('x')\n", "file_write"),
    ("with open('../benchmark.py', mode='a') as f:\n    pass\n", "file_write"),
    ("from pathlib import Path\nPath('out').write_text('x')\n", "file_write"),
    ("import os\nos.remove('benchmark.py')\n", "file_write"),
    ("import shutil\n", "file_write"),
    ("import os\nfd = os.open('x', os.O_WRONLY | os.O_CREAT)\n", "file_write"),
    ("import kz_harness\n", "module_shadowing"),
    ("import os\ngetattr(os, '_exit')(0)\n", "early_exit"),
    ("import sys\nsys.settrace(None)\n", "tracing"),
    ("import sys\nm = vars(sys)['modules']\n", "sys_modules"),
    ("import sys\nm = sys.__dict__\n", "sys_modules"),
    ("import marshal\n", "dynamic_code"),
    ("def k(x):\n    return x.__array_interface__['data'][0]\n", "address_read"),
    ("def k(x):\n    return x.ctypes.data\n", "address_read"),
    ("_seen = {}\ndef k(x):\n    return _seen.get(id(x))\n", "address_read"),
    ("def k(x):\n    return x.tobytes()\n", "content_key"),
    ("import hashlib\n", "content_key"),
    ("def k(x):\n    return hash(x.data.tobytes())\n", "content_key"),
    ("import types\nf = types.FunctionType\n", "code_edit"),
    ("text = open('/proc/self/maps').read()\n", "system_paths"),
    ("import os\nnames = os.listdir('/dev/shm')\n", "system_paths"),
    ("data = open('/proc/self/environ', 'rb').read()\n", "env_access"),
    ("def k(:\n", "unparseable"),
]


def _codes(files: dict[str, bytes]) -> set[str]:
    return {hit.code for hit in scan_files(files)}


@pytest.mark.parametrize(("source", "code"), PYTHON_CASES)
def test_each_pattern_is_hit(source: str, code: str) -> None:
    """Every pattern of the table is hit with its code, at the file that has it."""
    hits = scan_files({"src/kernel.py": source.encode()})
    assert code in {h.code for h in hits}, hits
    hit = next(h for h in hits if h.code == code)
    assert hit.path == "src/kernel.py" and hit.message.startswith(CODES[code])


@pytest.mark.parametrize(
    ("path", "data", "code"),
    [
        ("src/yaml/__init__.py", b"", "module_shadowing"),
        ("src/kz_harness/__init__.py", b"", "module_shadowing"),
        ("src/numpy.py", b"", "module_shadowing"),
        ("src/json.py", b"", "module_shadowing"),
        ("src/evil.pth", b"import os\n", "startup_hook"),
        ("src/sitecustomize.py", b"", "startup_hook"),
        ("src/lib/fast.so", b"\x7fELF\x02\x01", "native_code"),
        ("src/blob.bin", b"\x7fELF\x02\x01", "native_code"),
        ("src/__pycache__/kernel.cpython-311.pyc", b"\x00", "bytecode"),
    ],
)
def test_files_other_than_python_code(path: str, data: bytes, code: str) -> None:
    """Shadowing modules, startup hooks, native code and bytecode are hit by their path."""
    assert code in _codes({path: data, "src/kernel.py": b"x = 1\n"})


def test_line_numbers_point_at_the_use() -> None:
    """A hit names the line of the offending expression."""
    [hit] = scan_files({"src/k.py": b"x = 1\n\nimport gc\n"})
    assert (hit.code, hit.line) == ("gc", 3)


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as np\n\ndef k(x):\n    return np.sqrt(x)\n",
        "import os\nn = int(os.environ.get('OMP_NUM_THREADS', '1'))\n",
        "import os\np = os.path.join(os.path.dirname(__file__), 't.txt')\ntext = open(p).read()\n",
        "import tempfile, os\n"
        "with open(os.path.join(tempfile.gettempdir(), 'c.bin'), 'wb') as f:\n"
        "    f.write(b'')\n",
        "s = 'hello'.replace('h', 'j')\n",
        "import math\nfrom functools import lru_cache\n",
    ],
)
def test_honest_code_gives_no_hit(source: str) -> None:
    """Plain numeric code, one named environment variable, reads and scratch writes pass."""
    assert scan_files({"src/kernel.py": source.encode()}) == []


def test_the_example_kernels_are_clean() -> None:
    """Every example kernel and variant (honest code) scans clean."""
    roots = sorted(p.parent for p in EXAMPLES.rglob("src") if p.is_dir())
    assert roots
    for root in roots:
        assert scan_package(root) == [], root


def test_judge_files_are_not_scanned() -> None:
    """`.kernel_package/` is the board's judge, not the candidate: it is never scanned."""
    assert scan_files({".kernel_package/benchmark.py": b"import subprocess, gc\n"}) == []


def test_many_hits_are_capped() -> None:
    """A package with more hits than MAX_HITS lists the first ones and says how many more."""
    source = "".join(f"import gc as g{i}\n" for i in range(MAX_HITS + 5)).encode()
    hits = scan_files({"src/k.py": source})
    assert len(hits) == MAX_HITS + 1 and hits[-1].code == "too_many_hits"


def test_deep_nesting_does_not_crash() -> None:
    """Source nested past the parser's limits is a hit, not an exception."""
    source = ("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n").encode()
    assert _codes({"src/k.py": source}) == {"unparseable"}


def test_source_past_the_limits_is_a_hit_not_a_parse() -> None:
    """A Python file over the file limit, or past the total, is not parsed: each is a
    `not_scanned` hit (parsing holds the interpreter lock); the limits default to 128 KiB and
    512 KiB."""
    assert (MAX_FILE_BYTES, MAX_TOTAL_BYTES) == (128 * 1024, 512 * 1024)
    big = b"import gc\n" * 20
    assert [(h.code, h.path) for h in scan_files({"src/big.py": big}, max_file_bytes=100)] == [
        ("not_scanned", "src/big.py")
    ]
    files = {f"src/p{i}.py": b"x = 1\n" * 10 for i in range(5)}
    hits = scan_files(files, max_total_bytes=150)
    assert [(h.code, h.path) for h in hits] == [
        ("not_scanned", "src/p2.py"),
        ("not_scanned", "src/p3.py"),
        ("not_scanned", "src/p4.py"),
    ]
