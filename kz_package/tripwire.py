"""The static tripwire: places in a package's `src/` that ask a maintainer for a look.

`scan_files(files)` is a pure function of the package's files (path relative to the package
root → bytes). It parses every Python file under `src/` with `ast` (never imports or runs it)
and looks at the other files for startup hooks and native code. Each hit is a `Hit` with a
code, the file, the line and a sentence. A hit never refuses a package: the referee marks the
result *suspect* and a maintainer clears or disqualifies it (docs/review.md).
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kz_package.archive import PACKAGE_DIR
from kz_package.memread import PackageFiles
from kz_package.pyparse import parse_python

__all__ = ["CODES", "MAX_HITS", "Hit", "scan_files", "scan_package"]

MAX_HITS = 50  # a package with more gets the first ones and one `too_many_hits`
# Parsing holds the interpreter lock (about 1.5 s per MB here, and as long again to walk the
# tree), and kernels' Python sources are kilobytes: a larger file, or any past the total, is
# not parsed and is a `not_scanned` hit, which asks for a look like any other.
MAX_FILE_BYTES = 128 * 1024
MAX_TOTAL_BYTES = 512 * 1024

CODES: dict[str, str] = {
    "frame_walking": "walks interpreter frames or reaches other functions' globals",
    "code_edit": "reads or replaces function code objects",
    "tracing": "installs a trace, profile or audit hook",
    "gc": "uses the garbage collector's object lists",
    "ctypes": "uses ctypes or cffi (raw memory access)",
    "early_exit": "ends the process without unwinding (os._exit, os.abort)",
    "atexit": "registers code to run at exit or on finalisation",
    "signal": "installs signal handlers",
    "process": "starts processes (fork, subprocess, multiprocessing, os.system, spawn, exec)",
    "thread": "starts threads or event loops (threading, _thread, concurrent.futures, asyncio)",
    "module_shadowing": "ships a top-level module named like one the judge or harness imports",
    "sys_modules": "reads or edits sys.modules",
    "builtins": "reads or edits the builtins",
    "dynamic_import": "imports by computed name (__import__, importlib, runpy)",
    "dynamic_code": "compiles or runs code from strings (exec, eval, compile)",
    "env_access": "reads KZ_* variables or walks the environment",
    "file_write": "writes, removes or renames files (only its scratch space is its own)",
    "startup_hook": "ships a .pth file or a sitecustomize/usercustomize module",
    "native_code": "ships a shared object or other native binary",
    "bytecode": "ships compiled Python bytecode",
    "address_read": "reads arrays' addresses (a cache keyed by address)",
    "content_key": "hashes array contents (a cache keyed by content)",
    "system_paths": "names /proc, /dev/shm or /dev/mem (other processes' memory and files)",
    "unparseable": "has a Python file that does not parse",
    "not_scanned": "has Python source past the scan's limits (128 KiB a file, 512 KiB in all)",
    "too_many_hits": "has more hits than are listed",
}


@dataclass(frozen=True, slots=True)
class Hit:
    """One tripwire hit: `code` (a key of CODES), `path` in the package, `line` (0: the file)."""

    code: str
    path: str
    line: int
    message: str


# --- what counts ----------------------------------------------------------------------------

_MODULES: dict[str, str] = {
    "marshal": "dynamic_code",
    "pickle": "dynamic_code",
    "inspect": "frame_walking",
    "traceback": "frame_walking",
    "gc": "gc",
    "ctypes": "ctypes",
    "_ctypes": "ctypes",
    "cffi": "ctypes",
    "atexit": "atexit",
    "signal": "signal",
    "faulthandler": "signal",
    "subprocess": "process",
    "_posixsubprocess": "process",
    "multiprocessing": "process",
    "pty": "process",
    "posix": "process",
    "nt": "process",
    "threading": "thread",
    "_thread": "thread",
    "concurrent": "thread",
    "asyncio": "thread",
    "sched": "thread",
    "builtins": "builtins",
    "__builtin__": "builtins",
    "importlib": "dynamic_import",
    "imp": "dynamic_import",
    "runpy": "dynamic_import",
    "zipimport": "dynamic_import",
    "pkgutil": "dynamic_import",
    "shutil": "file_write",
    "hashlib": "content_key",
    "zlib": "content_key",
}

# Attribute (or imported) names that are suspicious whatever object they are read from.
_ATTRS: dict[str, str] = {
    "_getframe": "frame_walking",
    "_current_frames": "frame_walking",
    "f_back": "frame_walking",
    "f_globals": "frame_walking",
    "f_locals": "frame_walking",
    "f_builtins": "frame_walking",
    "f_code": "frame_walking",
    "tb_frame": "frame_walking",
    "tb_next": "frame_walking",
    "gi_frame": "frame_walking",
    "cr_frame": "frame_walking",
    "ag_frame": "frame_walking",
    "__globals__": "frame_walking",
    "__closure__": "frame_walking",
    "__subclasses__": "frame_walking",
    "__code__": "code_edit",
    "co_code": "code_edit",
    "CodeType": "code_edit",
    "FunctionType": "code_edit",
    "settrace": "tracing",
    "setprofile": "tracing",
    "addaudithook": "tracing",
    "monitoring": "tracing",
    "get_objects": "gc",
    "get_referrers": "gc",
    "get_referents": "gc",
    "_exit": "early_exit",
    "abort": "early_exit",
    "fork": "process",
    "forkpty": "process",
    "posix_spawn": "process",
    "posix_spawnp": "process",
    "register_at_fork": "process",
    "finalize": "atexit",
    "__builtins__": "builtins",
    "__import__": "dynamic_import",
    "environb": "env_access",
    "__array_interface__": "address_read",
    "ctypes": "address_read",  # an array's .ctypes.data (the module's import is `ctypes`)
    "__cuda_array_interface__": "address_read",
    "data_ptr": "address_read",  # a torch tensor's device address
    "tobytes": "content_key",
}
# Path methods that write, called on anything (checked at the call, where the path is seen).
_PATH_WRITES = frozenset(
    ["write_text", "write_bytes", "symlink_to", "hardlink_to", "unlink", "rmdir", "touch", "rename"]
)

# Names of `os` that are suspicious only when read from `os` (or `posix`/`nt`).
_OS_ATTRS: dict[str, str] = {
    "system": "process",
    "popen": "process",
    "kill": "process",
    "killpg": "process",
    "remove": "file_write",
    "unlink": "file_write",
    "rmdir": "file_write",
    "removedirs": "file_write",
    "rename": "file_write",
    "renames": "file_write",
    "replace": "file_write",
    "truncate": "file_write",
    "chmod": "file_write",
    "chown": "file_write",
    "link": "file_write",
    "symlink": "file_write",
    "mkfifo": "file_write",
    "mknod": "file_write",
    "utime": "file_write",
    **{f"exec{s}": "process" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")},
    **{f"spawn{s}": "process" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")},
}
_OS_MODULES = frozenset({"os", "posix", "nt"})
_CODE_CALLS = {
    "id": "address_read",
    "hash": "content_key",
    "exec": "dynamic_code",
    "eval": "dynamic_code",
    "compile": "dynamic_code",
    "breakpoint": "tracing",
}
# Names a string may spell for getattr/__import__ to reach them.
_SPELLED = {
    **{k: v for k, v in _ATTRS.items() if "_" in k},
    **{m: c for m, c in _MODULES.items() if c != "file_write"},
}
_SCRATCH_HINTS = frozenset(
    [
        "tempfile",
        "gettempdir",
        "mkdtemp",
        "mkstemp",
        "TMPDIR",
        "TemporaryDirectory",
        "NamedTemporaryFile",
        "TMP",
        "TEMP",
    ]
)
# Paths a candidate has no business naming (looked for, never opened here).
_SYSTEM_PATHS = ("/proc/", "/dev/shm", "/dev/mem")  # noqa: S108
_WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"})

# Top-level names in src/ that would shadow what the judge, the harness or common kernels
# import: the standard library, the project's own packages and the usual third-party ones.
_SHADOWED = frozenset(sys.stdlib_module_names) | frozenset(
    [
        "numpy",
        "yaml",
        "torch",
        "triton",
        "msgspec",
        "dulwich",
        "nats",
        "litestar",
        "anyio",
        "pytest",
        "_pytest",
        "scipy",
        "cupy",
        "jax",
        "jaxlib",
        "numba",
        "cuda",
        "pycuda",
        "tilelang",
        "cutlass",
        "setuptools",
        "pip",
        "pkg_resources",
        "typing_extensions",
        "sitecustomize",
        "usercustomize",
    ]
)


# --- the scan -------------------------------------------------------------------------------


def scan_package(root: Path | PackageFiles) -> list[Hit]:
    """`scan_files` over a package on disk (its root directory) or read into memory."""
    if isinstance(root, PackageFiles):
        return scan_files({path: data for path, (_, data) in root.files.items()})
    files = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
    return scan_files(files)


def scan_files(
    files: Mapping[str, bytes],
    *,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> list[Hit]:
    """Every tripwire hit of a package (path → bytes), in path then line order, at most
    MAX_HITS of them (plus one `too_many_hits` when there were more)."""
    hits: list[Hit] = []
    budget = max_total_bytes
    for path in sorted(files):
        data = files[path]
        hits.extend(_other_file(path, data))
        if path.startswith("src/") and path.endswith(".py"):
            if len(data) > min(max_file_bytes, budget):
                hits.append(_hit("not_scanned", path, 0, f"{len(data)} bytes, not parsed"))
                continue
            budget -= len(data)
            hits.extend(_python(path, data))
    hits.extend(_shadowing(files))
    unique = sorted(set(hits), key=lambda h: (h.path, h.line, h.code, h.message))
    if len(unique) > MAX_HITS:
        extra = len(unique) - MAX_HITS
        return [*unique[:MAX_HITS], _hit("too_many_hits", "src/", 0, f"{extra} more not listed")]
    return unique


def _hit(code: str, path: str, line: int, detail: str) -> Hit:
    return Hit(code, path, line, f"{CODES[code]}: {detail}"[:300])


def _other_file(path: str, data: bytes) -> Iterator[Hit]:
    if path.startswith(f"{PACKAGE_DIR}/"):
        return
    name = path.rsplit("/", 1)[-1]
    if name.endswith(".pth"):
        yield _hit("startup_hook", path, 0, "a .pth file runs at interpreter start")
    if name in ("sitecustomize.py", "usercustomize.py"):
        yield _hit("startup_hook", path, 0, f"{name} runs at interpreter start")
    if name.endswith((".so", ".pyd", ".dylib", ".dll")) or data.startswith(b"\x7fELF"):
        yield _hit("native_code", path, 0, "a shared object or executable")
    if name.endswith((".pyc", ".pyo")) or "__pycache__/" in path:
        yield _hit("bytecode", path, 0, "compiled bytecode cannot be reviewed")


def _shadowing(files: Iterable[str]) -> Iterator[Hit]:
    tops: dict[str, str] = {}
    for path in files:
        parts = path.split("/")
        if len(parts) < 2 or parts[0] != "src":
            continue
        if len(parts) == 2:
            stem = parts[1].split(".", 1)[0]
            if parts[1].endswith((".py", ".so", ".pyd", ".pyc")) or "." not in parts[1]:
                tops.setdefault(stem, path)
        else:
            tops.setdefault(parts[1], f"src/{parts[1]}/")
    for name, path in sorted(tops.items()):
        if name in _SHADOWED or name.startswith("kz_") or name == "kz":
            yield _hit("module_shadowing", path, 0, f"src/ would shadow the module {name!r}")


def _python(path: str, data: bytes) -> list[Hit]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = parse_python(data, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return [_hit("unparseable", path, getattr(exc, "lineno", 0) or 0, type(exc).__name__)]
    visitor = _Visitor(path)
    try:
        visitor.visit(tree)
    except RecursionError:
        visitor.add("unparseable", tree, "nested too deeply to scan")
    return visitor.hits


class _Visitor(ast.NodeVisitor):
    """Collects the hits of one module; `aliases` maps local names to the modules they are."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.hits: list[Hit] = []
        self.aliases: dict[str, str] = {"os": "os", "sys": "sys"}

    def add(self, code: str, node: ast.AST, detail: str) -> None:
        self.hits.append(_hit(code, self.path, getattr(node, "lineno", 0), detail))

    def _module(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute) and self._module(node.value) == "os":
            return "os.path" if node.attr == "path" else None
        return None

    # imports

    def _imported(self, node: ast.AST, module: str) -> None:
        root = module.split(".", 1)[0]
        if root in _MODULES:
            self.add(_MODULES[root], node, f"imports {module}")
        elif root.startswith("kz_") or root == "kz":
            self.add("module_shadowing", node, f"imports the platform's own {module}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._imported(node, alias.name)
            self.aliases[(alias.asname or alias.name).split(".", 1)[0]] = alias.name
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level == 0:
            self._imported(node, module)
        for alias in node.names:
            self._name_from(node, module if node.level == 0 else "", alias.name)
            if node.level == 0 and alias.name != "*":
                self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
        self.generic_visit(node)

    def _name_from(self, node: ast.AST, module: str, name: str) -> None:
        if name in _ATTRS:
            self.add(_ATTRS[name], node, f"imports {name} from {module or 'a relative module'}")
        elif module in _OS_MODULES and name in _OS_ATTRS:
            self.add(_OS_ATTRS[name], node, f"imports {module}.{name}")
        elif module in _OS_MODULES and name == "environ":
            self.add("env_access", node, f"imports {module}.environ")
        elif module == "sys" and name == "modules":
            self.add("sys_modules", node, "imports sys.modules")

    # names, attributes, calls

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = self._module(node.value)
        if node.attr in _ATTRS:
            self.add(_ATTRS[node.attr], node, f"uses .{node.attr}")
        elif base in _OS_MODULES and node.attr in _OS_ATTRS:
            call = getattr(node, "kz_parent", None)
            scratch = isinstance(call, ast.Call) and call.func is node and _names_scratch(call)
            if not (scratch and _OS_ATTRS[node.attr] == "file_write"):
                self.add(_OS_ATTRS[node.attr], node, f"uses {base}.{node.attr}")
        elif base == "sys" and node.attr == "modules":
            self.add("sys_modules", node, "uses sys.modules")
        elif base == "os" and node.attr == "environ":
            self._environ(node)
        elif base in ("sys", "builtins") and node.attr == "__dict__":
            self.add("sys_modules" if base == "sys" else "builtins", node, f"uses {base}.__dict__")
        self.generic_visit(node)

    def _environ(self, node: ast.Attribute) -> None:
        """`os.environ["NAME"]` and `os.environ.get("NAME")` read one variable (the constant
        is checked on its own); anything else walks, copies or edits the environment."""
        parent = getattr(node, "kz_parent", None)
        if isinstance(parent, ast.Subscript) and _const_str(parent.slice) is not None:
            return
        if isinstance(parent, ast.Attribute) and parent.attr == "get":
            call = getattr(parent, "kz_parent", None)
            if isinstance(call, ast.Call) and call.args and _const_str(call.args[0]) is not None:
                return
        what = f".{parent.attr}" if isinstance(parent, ast.Attribute) else ""
        self.add("env_access", node, f"uses os.environ{what} beyond reading one named variable")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "__import__"):
            self.add(_ATTRS[node.id], node, f"uses {node.id}")
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        if self._is_environ(node.iter):
            self.add("env_access", node, "iterates over os.environ")
        self.generic_visit(node)

    def _is_environ(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ"

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if isinstance(text, str):
            if text.startswith("KZ_"):
                self.add("env_access", node, f"names the variable {text[:40]!r}")
            elif "/proc/self/environ" in text:
                self.add("env_access", node, f"names {text[:40]!r}")
            elif any(p in text for p in _SYSTEM_PATHS):
                self.add("system_paths", node, f"names {text[:40]!r}")
            elif text in _SPELLED:
                self.add(_SPELLED[text], node, f"spells {text!r} in a string")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _CODE_CALLS:
            self.add(_CODE_CALLS[func.id], node, f"calls {func.id}()")
        if isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "delattr"):
            self._getattr(node, func.id)
        if isinstance(func, ast.Name) and func.id == "vars" and node.args:
            target = self._module(node.args[0])
            if target in ("sys", "builtins"):
                code = "sys_modules" if target == "sys" else "builtins"
                self.add(code, node, f"vars({target})")
        computed = not node.args or _const_str(node.args[0]) is None
        if isinstance(func, ast.Attribute) and func.attr == "getenv" and computed:
            self.add("env_access", node, "calls getenv() with a computed name")
        self._file_write(node)
        self.generic_visit(node)

    def _getattr(self, node: ast.Call, fn: str) -> None:
        """getattr/setattr/delattr on sys, builtins or os (a constant name that is harmless
        on os, like getcwd, passes; the string constants are checked on their own)."""
        if len(node.args) < 2:
            return
        target = self._module(node.args[0])
        name = _const_str(node.args[1])
        if target in ("sys", "builtins"):
            code = "sys_modules" if target == "sys" else "builtins"
        elif target in _OS_MODULES and (name is None or name in _OS_ATTRS):
            code = _OS_ATTRS.get(name or "", "process")
        else:
            return
        self.add(code, node, f"{fn}({target}, {name!r})" if name else f"{fn}({target}, ...)")

    def _file_write(self, node: ast.Call) -> None:
        func = node.func
        mode: ast.AST | None = None
        opened: ast.AST | None = None
        if isinstance(func, ast.Name) and func.id == "open":
            mode, opened = _arg(node, 1, "mode"), _arg(node, 0, "file")
        elif isinstance(func, ast.Attribute) and func.attr in _PATH_WRITES:
            if self._module(func.value) not in _OS_MODULES and not _names_scratch(node):
                self.add("file_write", node, f"calls .{func.attr}()")
            return
        elif isinstance(func, ast.Attribute) and func.attr == "open":
            base = self._module(func.value)
            if base in _OS_MODULES:
                self._os_open(node)
                return
            module_level = isinstance(func.value, ast.Name) and func.value.id in ("io", "codecs")
            mode = _arg(node, 1 if module_level else 0, "mode")
            opened = _arg(node, 0, "file") if module_level else func.value
        else:
            return
        text = _const_str(mode) if mode is not None else "r"
        if text is not None and not set(text) & set("wax+"):
            return
        if opened is not None and _names_scratch(opened):
            return
        detail = f"opens a file in mode {text!r}" if text else "opens a file in a computed mode"
        self.add("file_write", node, detail)

    def _os_open(self, node: ast.Call) -> None:
        flags = _arg(node, 1, "flags")
        names: set[str] = set()
        for sub in ast.walk(flags) if flags is not None else ():
            if isinstance(sub, ast.Attribute | ast.Name):
                names.add(sub.attr if isinstance(sub, ast.Attribute) else sub.id)
        if (flags is None or names & _WRITE_FLAGS or not names) and not _names_scratch(node):
            self.add("file_write", node, "os.open() for writing")

    def generic_visit(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            child.kz_parent = node  # type: ignore[attr-defined]
        super().generic_visit(node)


def _arg(node: ast.Call, index: int, keyword: str) -> ast.AST | None:
    if len(node.args) > index:
        return node.args[index]
    return next((k.value for k in node.keywords if k.arg == keyword), None)


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _names_scratch(node: ast.AST) -> bool:
    """Whether an expression names the scratch space (tempfile, TMPDIR): writes there are fine."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in _SCRATCH_HINTS:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in _SCRATCH_HINTS:
            return True
        if isinstance(sub, ast.Constant) and sub.value in _SCRATCH_HINTS:
            return True
    return False
