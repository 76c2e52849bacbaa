"""Namespace checkpoints that run *inside* the kernel: save the user's variables, put them back, discard.

Like ``summarise.py`` this module is never imported by the kernel: its source (``checkpoint.snapshot_source()``)
is sent with each request and run in a throw-away namespace, so it works in kernels that do not have
``jupyter_acp`` installed (a gateway kernel on a cluster node).  The snapshot stays with the kernel, in a
private folder on the kernel's side; the server only ever gets the manifest back (JSON: names, reasons,
sizes), never a pickle, so a hostile kernel can lie in a manifest but cannot make the server unpickle.
It is also an ordinary module: the server-side tests import it.  Standard library only at the top;
``cloudpickle`` and ``dill`` are used where the kernel has them.

How a namespace is saved, and why:

* **Variable by variable**, each its own pickle, so one that does not pickle (a generator, a socket) or
  does not fit the byte budget is skipped with its reason and the rest is saved.  Protocol 5 with
  out-of-band buffers: a NumPy array or a DataFrame's blocks are written straight from their memory
  (no copy into a pickle string), which is what keeps a checkpoint near the cost of a bare ``pickle.dumps``.
* **References between variables are kept.**  Per-variable pickles would otherwise copy shared objects:
  after ``model2 = model`` or ``pipe = [scaler, clf]`` a restore would give two models, or a pipeline
  holding copies.  A top-level object met inside another variable is written as a reference to its
  name (``persistent_id``) and resolved on restore; names that refer to each other in a cycle
  (``fig, ax = plt.subplots()``: the figure holds the axes and the axes the figure) are pickled
  together as one entry.  This is Kishu's "co-variable" idea (Li et al., VLDB 2024) cut down to the
  top level: objects shared *below* the top level by two variables are still saved, and restored, twice.
* **Functions defined in the notebook are saved by value**, rebuilt with the live namespace as their
  globals: stdlib pickle saves them by name (a restore would then give the function as the turn
  redefined it), and cloudpickle by value with a private copy of the globals (a restored function
  would no longer see the notebook's variables).  Classes defined in the notebook are saved by name
  only, so they are listed as skipped (their instances are restored with the class defined now).
* ``cloudpickle`` (else ``dill``), where the kernel has it, is tried for a variable stdlib pickle
  refuses (classes defined inside functions, and their instances).
* **Incremental, but never on trust.**  Every entry carries the SHA-256 of its bytes.  An entry whose
  bytes equal an entry of an earlier checkpoint of this kernel is hard-linked to that file instead of
  written again (an unchanged 1 GB array costs one hash pass, not another 1 GB on disk); a restore
  keeps the live object of a variable whose bytes now equal the checkpoint's (its identity survives,
  nothing is loaded).  Python has no cheap "changed since" mark (an array mutated in place keeps its
  id, shape and dtype), so nothing is skipped on an id or a sampled fingerprint: an object mutated in
  place always hashes differently and is saved again.
* **Where**: ``/dev/shm`` (memory) when it has room for the budget and the machine's available memory
  stays ample, else the temp folder (disk).  Measured on a small cloud VM: writing to ext4 ran at
  0.25 GB/s, to tmpfs at 1.8 GB/s, while ``pickle.dumps`` of an array ran at 0.6 GB/s: only memory
  keeps a checkpoint within 1.5x of a bare pickle there.  The folder is ``jupyter-acp-checkpoints-<uid>``,
  mode 0700, checked to be ours and not a link (it sits in a shared folder), with one sub-folder per
  kernel process; files are 0600 and created exclusively.  A checkpoint is built in ``.tmp-<id>`` and
  renamed at the end, so a half-made one never looks complete.

Restore takes a checkpoint of the present first (its id is returned: the restore can be undone), puts
the saved names back in the same kernel, re-binds modules, removes the names created after the checkpoint
and says what it could not restore and why.  The IPython machinery and names starting with ``_`` are
never touched.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import marshal
import mmap
import os
import pickle
import re
import shutil
import stat
import struct
import sys
import tempfile
import threading
import time
import types
from typing import Any

FORMAT = 1
MAGIC = b"JACPCK1\n"
#: entries smaller than this share one file per checkpoint (a thousand small variables are not a thousand files)
PACK_BELOW = 256 * 1024
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: IPython's own names: never saved, never listed, never touched
IPYTHON_NAMES = re.compile(r"^(_|__|___|_i|_ii|_iii|_i\d+|_\d+|_ih|_oh|_dh|_exit_code|__\w*__)$")
HIDDEN = {"In", "Out", "exit", "quit", "get_ipython", "open"}
#: objects whose identity nobody relies on: never written as a reference to another variable
NO_IDENTITY = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range, slice)
DISK_MARGIN = 64 << 20
#: free room is checked before each big entry and after this many bytes of small ones
ROOM_EVERY = 64 << 20
#: entries at least this big are hashed in a second thread while they are written
PARALLEL_ABOVE = 4 << 20
#: buffers at least this big are read into an anonymous mapping (see ``_read_exact``)
BIG_READ = 1 << 20
MEMORY_MARGIN = 512 << 20

_HEAD = struct.Struct("<QI")
_BUF = struct.Struct("<QB")


class Refused(Exception):
    """A request this module will not carry out; the text says why and what to do."""


class _OverBudget(Exception):
    pass


# -- the namespace ---------------------------------------------------------------------------------
def classify(ns: dict[str, Any], hidden: dict[str, Any]) -> dict[str, Any]:
    """Sort the namespace: ``candidates`` [(name, value)] to pickle, ``modules`` {name: module name},
    ``skipped`` [{name, reason}], ``visible`` (every name a restore manages).  IPython's machinery
    (``In``, ``Out``, ``_``, ``_i3``, ``get_ipython``, ``exit``, ...) is left out altogether."""
    out: dict[str, Any] = {"candidates": [], "modules": {}, "skipped": [], "visible": []}
    for name, value in list(ns.items()):
        if not isinstance(name, str) or IPYTHON_NAMES.match(name):
            continue
        if name in HIDDEN or (name in hidden and hidden[name] is value):
            continue
        if name.startswith("_"):
            out["skipped"].append({"name": name, "reason": "a private name (it starts with '_'): not saved"})
            continue
        out["visible"].append(name)
        if isinstance(value, types.ModuleType):
            out["modules"][name] = value.__name__
            out["skipped"].append(
                {"name": name, "reason": "a module: not pickled; bound again to the same module on restore"}
            )
        elif isinstance(value, type) and value.__module__ == "__main__":
            out["skipped"].append(
                {
                    "name": name,
                    "reason": "a class defined in the notebook: saved by name only, so a restore keeps the class "
                    "as it is defined then (its instances are restored)",
                }
            )
        else:
            out["candidates"].append((name, value))
    return out


def _identity_matters(value: Any, ns: dict[str, Any]) -> bool:
    if isinstance(value, NO_IDENTITY) or isinstance(value, (types.ModuleType, types.BuiltinFunctionType, type)):
        return False
    if isinstance(value, types.FunctionType) and value.__globals__ is not ns:
        return False  # a library's function: pickled by name, so its identity survives anyway
    return True


# -- pickling --------------------------------------------------------------------------------------
class _Saver:
    """What every pickler kind gets: references to other variables and the notebook namespace
    (``persistent_id``), and notebook functions, code, cells and modules (``reducer_override``)."""

    _ns: dict[str, Any]
    _owners: dict[int, tuple[str, Any]]
    _inside: set[int]
    deps: set[str]

    def setup(self, ns: dict[str, Any], owners: dict[int, tuple[str, Any]], inside: set[int]) -> None:
        self._ns = ns
        self._owners = owners
        self._inside = inside
        self.deps = set()

    def persistent_id(self, obj: Any) -> Any:
        if obj is self._ns:
            return ("ns",)
        owner = self._owners.get(id(obj))
        if owner is None or owner[1] is not obj or id(obj) in self._inside:
            return None
        self.deps.add(owner[0])
        return ("var", owner[0])

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        if t is types.FunctionType and obj.__globals__ is self._ns:
            slots = {
                "__qualname__": obj.__qualname__,
                "__kwdefaults__": obj.__kwdefaults__,
                "__annotations__": obj.__annotations__,
                "__doc__": obj.__doc__,
                "__module__": obj.__module__,
            }
            args = (obj.__code__, self._ns, obj.__name__, obj.__defaults__, obj.__closure__)
            return (types.FunctionType, args, (obj.__dict__ or None, slots))
        if t is types.CodeType:
            return (marshal.loads, (marshal.dumps(obj),))
        if t is types.CellType:
            try:
                contents = obj.cell_contents
            except ValueError:  # an empty cell (a name not yet bound in the enclosing function)
                return (types.CellType, ())
            return (types.CellType, (), (None, {"cell_contents": contents}))
        if t is types.ModuleType:
            name = getattr(obj, "__name__", None)
            if isinstance(name, str) and sys.modules.get(name) is obj:
                return (importlib.import_module, (name,))
        if obj is types.FunctionType or obj is types.CellType:
            return (getattr, (types, "FunctionType" if obj is types.FunctionType else "CellType"))
        base = getattr(super(), "reducer_override", None)
        return base(obj) if base is not None else NotImplemented


def _picklers(allowed: list[str] | None) -> list[tuple[str, Any]]:
    """(kind, Pickler class or None) in the order they are tried: stdlib first (the C pickler, fastest).
    cloudpickle and dill are imported only when stdlib pickle refuses a variable (``_pickler_class``):
    importing them costs tens of milliseconds, paid by every checkpoint otherwise."""
    kinds = ["pickle", "cloudpickle", "dill"]
    return [(k, None) for k in kinds if allowed is None or k in allowed]


_CLASSES: dict[str, Any] = {}


def _pickler_class(kind: str) -> Any:
    """The ``_Saver`` pickler of ``kind``, or None when the kernel does not have that library."""
    if kind not in _CLASSES:
        base: Any = None
        if kind == "pickle":
            base = pickle.Pickler
        else:
            try:
                base = importlib.import_module(kind).Pickler
            except Exception:
                base = None
        _CLASSES[kind] = type("_Saving_" + kind, (_Saver, base), {}) if base is not None else None
    return _CLASSES[kind]


class _Sink:
    """The pickle's own bytes, in chunks, refusing past ``limit``: an object far over the budget is
    abandoned at the budget, never pickled whole."""

    def __init__(self, limit: int) -> None:
        self.chunks: list[Any] = []
        self.size = 0
        self.limit = limit

    def write(self, b: Any) -> int:
        n = memoryview(b).nbytes
        self.size += n
        if self.size > self.limit:
            raise _OverBudget()
        self.chunks.append(b)
        return n


class Frame:
    """One pickled entry: the pickle stream, its out-of-band buffers, size, digest and references."""

    def __init__(self, kind: str, sink: _Sink, buffers: list[memoryview], deps: set[str]) -> None:
        self.kind = kind
        self.chunks = sink.chunks
        self.buffers = buffers
        self.deps = deps
        self.size = sink.size + sum(b.nbytes for b in buffers)
        self._digest: str | None = None

    @property
    def digest(self) -> str:
        """SHA-256 of the bytes as stored (computed once)."""
        if self._digest is None:
            h = hashlib.sha256()
            for piece in self.pieces():
                h.update(piece)
            self._digest = h.hexdigest()
        return self._digest

    def pieces(self) -> Any:
        """The bytes as stored, after the magic: head, pickle stream, then each buffer (length, read-only flag)."""
        yield _HEAD.pack(sum(memoryview(c).nbytes for c in self.chunks), len(self.buffers))
        yield from self.chunks
        for b in self.buffers:
            yield _BUF.pack(b.nbytes, 1 if b.readonly else 0)
            yield b


def dump(
    root: Any,
    ns: dict[str, Any],
    owners: dict[int, tuple[str, Any]],
    inside: set[int],
    limit: int,
    picklers: list[tuple[str, Any]],
) -> Frame:
    """Pickle ``root`` with the first pickler kind that takes it; ``_OverBudget`` past ``limit`` bytes."""
    errors: list[tuple[str, str]] = []
    for kind, _ in picklers:
        cls = _pickler_class(kind)
        if cls is None:
            continue
        sink = _Sink(limit)
        buffers: list[memoryview] = []

        def on_buffer(pb: Any, sink: _Sink = sink, buffers: list[memoryview] = buffers) -> bool:
            try:
                raw = pb.raw()
            except BufferError:  # not contiguous: in the stream
                return True
            sink.size += raw.nbytes
            if sink.size > sink.limit:
                raise _OverBudget()
            buffers.append(raw)
            return False

        p = cls(sink, protocol=5, buffer_callback=on_buffer)
        p.setup(ns, owners, inside)
        try:
            p.dump(root)
        except _OverBudget:
            raise
        except RecursionError:
            errors.append((kind, "too deeply nested to pickle"))
        except Exception as e:
            errors.append((kind, "%s: %s" % (type(e).__name__, str(e)[:200])))
        else:
            sink.size -= sum(b.nbytes for b in buffers)  # counted by on_buffer for the budget; Frame adds them
            return Frame(kind, sink, buffers, p.deps)
    raise TypeError(_why_not(errors))


def _why_not(errors: list[tuple[str, str]]) -> str:
    """``TypeError: cannot pickle 'generator' object`` (and what the other picklers said, when it differs)."""
    if not errors:
        return "no pickler"
    first = errors[0][1]
    others = [k for k, _ in errors[1:]]
    text = first
    if others and all(e == first for _, e in errors[1:]):
        text += " (%s neither)" % " and ".join(others)
    else:
        text += "".join("; %s: %s" % (k, e) for k, e in errors[1:] if e != first)
    return text


# -- files -----------------------------------------------------------------------------------------
def _private_dir(path: str) -> str:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    uid = os.getuid() if hasattr(os, "getuid") else None
    if (
        not stat.S_ISDIR(st.st_mode)
        or (uid is not None and st.st_uid != uid)
        or (hasattr(os, "getuid") and st.st_mode & 0o077)
    ):
        raise Refused(
            "%s is not a private folder of this user (a link, another owner, or open to others): checkpoints "
            "are not written there; remove it and try again" % path
        )
    return path


def _meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                out[key] = int(rest.split()[0]) * 1024
    except Exception:
        pass
    return out


def _free(path: str) -> int:
    try:
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize
    except Exception:
        return 1 << 62


def pick_storage(storage: str, budget: int) -> tuple[str, str]:
    """(kind, folder): ``memory`` (``/dev/shm``) or ``disk`` (the temp folder); ``auto`` prefers memory
    when it holds the whole budget and twice the budget stays available to programs."""
    shm = "/dev/shm"
    if storage in ("auto", "memory") and os.path.isdir(shm) and os.access(shm, os.W_OK):
        available = _meminfo().get("MemAvailable", 0)
        if storage == "memory" or (_free(shm) >= budget and available >= 2 * budget):
            return "memory", shm
    if storage == "memory":
        raise Refused("no /dev/shm in this kernel's machine: use storage 'disk' or 'auto'")
    return "disk", tempfile.gettempdir()


def _room(kind: str, folder: str, size: int) -> str | None:
    """Why ``size`` more bytes cannot be written (None when they can)."""
    if kind == "memory":
        available = _meminfo().get("MemAvailable")
        if available is not None and available - size < MEMORY_MARGIN:
            return "not enough free memory for it in the kernel's machine (%d MB available)" % (available >> 20)
    free = _free(folder)
    if free - size < (DISK_MARGIN if kind == "disk" else 0):
        return "not enough room for it in %s (%d MB free)" % (folder, free >> 20)
    return None


def _create(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)


def _write_all(fd: int, data: Any) -> int:
    view = memoryview(data).cast("B")
    done = 0
    while done < view.nbytes:
        done += os.write(fd, view[done : done + (1 << 30)])
    return done


def _write_frame(fd: int, frame: Frame) -> int:
    n = _write_all(fd, MAGIC)
    for piece in frame.pieces():
        n += _write_all(fd, piece)
    return n


def _write_hashing(fd: int, frame: Frame) -> int:
    """Write a frame while another thread hashes it (both let go of the GIL on big buffers): a big entry
    costs about the slower of the two passes, not their sum."""
    if frame.size < PARALLEL_ABOVE:
        frame.digest  # noqa: B018 - computed now, while the object cannot change
        return _write_frame(fd, frame)
    hasher = threading.Thread(target=lambda: frame.digest, name="jupyter-acp-checkpoint-hash", daemon=True)
    hasher.start()
    try:
        return _write_frame(fd, frame)
    finally:
        hasher.join()


def _read_exact(fh: Any, n: int) -> Any:
    """``n`` bytes from ``fh``, in memory the restored object may keep (a NumPy array is built on it).
    A big one goes to an anonymous mapping: ``bytearray(n)`` first zeroes every page, which made loading a
    large array a third slower than ``pickle.loads``; the mapping's pages are zeroed by the OS as they are
    first written, by the read itself."""
    buf: Any = mmap.mmap(-1, n) if n >= BIG_READ else bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = fh.readinto(view[got:])
        if not k:
            raise Refused("a checkpoint file is cut short (it was changed after it was written)")
        got += k
    return buf


def _read_bytes(fh: Any, n: int) -> bytes:
    data = fh.read(n)
    if len(data) == n:
        return bytes(data)
    return bytes(data) + bytes(_read_exact(fh, n - len(data)))


def read_frame(fh: Any) -> tuple[bytes, list[Any]]:
    """The pickle stream and buffers of the frame at ``fh``'s position."""
    if bytes(_read_exact(fh, len(MAGIC))) != MAGIC:
        raise Refused("a checkpoint file is not in the expected format")
    size, count = _HEAD.unpack(_read_exact(fh, _HEAD.size))
    stream = _read_bytes(fh, size)
    buffers: list[Any] = []
    for _ in range(count):
        n, readonly = _BUF.unpack(_read_exact(fh, _BUF.size))
        data = _read_exact(fh, n)
        buffers.append(memoryview(data).toreadonly() if readonly else data)
    return stream, buffers


def _folders(budget: int, storage: str) -> dict[str, str]:
    kind, folder = pick_storage(storage, budget)
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    base = _private_dir(os.path.join(folder, "jupyter-acp-checkpoints-%s" % uid))
    mine = _private_dir(os.path.join(base, str(os.getpid())))
    return {"kind": kind, "folder": folder, "base": base, "mine": mine}


def _all_mine() -> list[str]:
    """This kernel process's checkpoint folders, in memory and on disk."""
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    out = []
    for folder in ("/dev/shm", tempfile.gettempdir()):
        path = os.path.join(folder, "jupyter-acp-checkpoints-%s" % uid, str(os.getpid()))
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and path not in out:
            out.append(path)
    return out


_MANIFESTS: list[list[dict[str, Any]]] = []


def _changed() -> None:
    """The checkpoints on disk changed: read them again next time."""
    del _MANIFESTS[:]


def _manifests() -> list[dict[str, Any]]:
    """This kernel's checkpoints, oldest first; read once per request (this module is run afresh for each)."""
    if _MANIFESTS:
        return _MANIFESTS[0]
    found = []
    for mine in _all_mine():
        for entry in os.listdir(mine):
            if entry.startswith("."):
                continue
            try:
                with open(os.path.join(mine, entry, "manifest.json")) as fh:
                    m = json.load(fh)
            except Exception:
                continue
            m["_dir"] = os.path.join(mine, entry)
            found.append(m)
    found.sort(key=lambda m: m.get("created", 0))
    _MANIFESTS.append(found)
    return found


def _find(checkpoint_id: str) -> dict[str, Any]:
    for m in _manifests():
        if m.get("id") == checkpoint_id:
            return m
    raise Refused(
        "no checkpoint %r in this kernel (discarded, evicted, or the kernel was restarted since: a restart "
        "loses every checkpoint with the namespace)" % checkpoint_id
    )


def _tidy(base: str, mine: str) -> None:
    """Leftovers: half-made checkpoints of this process, folders of kernel processes that are gone."""
    for entry in os.listdir(mine):
        if entry.startswith(".tmp-"):
            shutil.rmtree(os.path.join(mine, entry), ignore_errors=True)
    for entry in os.listdir(base):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                os.kill(int(entry), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(base, entry), ignore_errors=True)
            except Exception:
                pass


# -- the reference graph ---------------------------------------------------------------------------
def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph`` (iterative: a namespace may hold a long chain of references),
    each component before the components that refer to it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(comp)
    return out


# -- checkpoint ------------------------------------------------------------------------------------
def _ns_and_hidden(shell: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    ns = getattr(shell, "user_ns", None)
    if not isinstance(ns, dict):
        raise Refused("this kernel has no IPython user namespace (get_ipython().user_ns): checkpoints need one")
    hidden = getattr(shell, "user_ns_hidden", None)
    return ns, hidden if isinstance(hidden, dict) else {}


def save(shell: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Checkpoint the namespace under ``args['id']``; answers the manifest."""
    t0 = time.perf_counter()
    cid = str(args.get("id", ""))
    if not ID_RE.match(cid):
        raise Refused("a checkpoint id is 1-64 letters, digits, '-' or '_'")
    budget = int(args.get("budget", 1 << 30))
    keep = int(args.get("keep", 20))
    protect = set(args.get("protect") or ())
    allowed = args.get("picklers")
    ns, hidden = _ns_and_hidden(shell)
    folders = _folders(budget, str(args.get("storage", "auto")))
    mine = folders["mine"]
    _tidy(folders["base"], mine)
    if any(m.get("id") == cid for m in _manifests()):
        raise Refused("a checkpoint %r exists already in this kernel" % cid)
    tmp = _private_dir(os.path.join(mine, ".tmp-" + cid))
    try:
        manifest = _save_into(ns, hidden, cid, budget, allowed, folders, tmp)
        manifest["seconds"] = round(time.perf_counter() - t0, 4)
        with open(os.open(os.path.join(tmp, "manifest.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
            fh.write(json.dumps(manifest))  # one shot: json's C encoder (json.dump streams in Python)
        os.rename(tmp, os.path.join(mine, cid))
        _changed()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    manifest["evicted"] = _evict(keep, protect | {cid})
    return manifest


def _known_blobs() -> tuple[dict[str, str], set[int]]:
    """digest -> file of every stand-alone entry of this kernel's earlier checkpoints, and their sizes."""
    out: dict[str, str] = {}
    sizes: set[int] = set()
    for m in _manifests():
        for e in m.get("entries", ()):
            if e.get("offset") is None and e.get("digest"):
                out[e["digest"]] = os.path.join(m["_dir"], e["file"])
                sizes.add(e.get("size"))
    return out, sizes


def _save_into(
    ns: dict[str, Any],
    hidden: dict[str, Any],
    cid: str,
    budget: int,
    allowed: list[str] | None,
    folders: dict[str, str],
    tmp: str,
) -> dict[str, Any]:
    sorted_ns = classify(ns, hidden)
    skipped: list[dict[str, str]] = sorted_ns["skipped"]
    candidates: list[tuple[str, Any]] = sorted_ns["candidates"]
    picklers = _picklers(allowed)
    owners: dict[int, tuple[str, Any]] = {}
    for name, value in candidates:
        if _identity_matters(value, ns) and id(value) not in owners:
            owners[id(value)] = (name, value)
    values = dict(candidates)
    known, sizes = _known_blobs()
    state = {"used": 0, "written": 0, "files": 0, "unchecked": 0}
    pack_fd: list[int | None] = [None]
    pack_size = [0]
    entries: dict[str, dict[str, Any]] = {}  # first member -> entry
    member_of: dict[str, str] = {}
    why: dict[str, str] = {}

    def store(members: list[str]) -> None:
        root = values[members[0]] if len(members) == 1 else tuple(values[m] for m in members)
        inside = {id(values[m]) for m in members if owners.get(id(values[m]), ("",))[0] == m}
        try:
            frame = dump(root, ns, owners, inside, budget - state["used"], picklers)
        except _OverBudget:
            for m in members:
                why[m] = (
                    "over the checkpoint budget: it needs more than the %d MB left of %d MB "
                    "(JupyterACPTools.checkpoint_bytes)" % ((budget - state["used"]) >> 20, budget >> 20)
                )
            return
        except Exception as e:
            for m in members:
                why[m] = "cannot be pickled: %s" % e
            return
        state["unchecked"] += frame.size
        if frame.size >= PACK_BELOW or state["unchecked"] >= ROOM_EVERY:  # /proc/meminfo is not free to read
            state["unchecked"] = 0
            no_room = _room(folders["kind"], folders["folder"], frame.size)
            if no_room is not None:
                for m in members:
                    why[m] = no_room
                return
        entry: dict[str, Any] = {
            "members": members,
            "deps": sorted(frame.deps - set(members)),
            "size": frame.size,
            "pickler": frame.kind,
        }
        if frame.size < PACK_BELOW:
            fd = pack_fd[0]
            if fd is None:
                fd = pack_fd[0] = _create(os.path.join(tmp, "small.pack"))
            entry["file"] = "small.pack"
            entry["offset"] = pack_size[0]
            n = _write_frame(fd, frame)
            entry["length"] = n
            pack_size[0] += n
            state["written"] += n
        else:
            state["files"] += 1
            entry["file"] = "%d.entry" % state["files"]
            entry["offset"] = None
            path = os.path.join(tmp, entry["file"])
            # hash first only when an earlier entry has this very size: then the hash may spare the write
            earlier = known.get(frame.digest) if frame.size in sizes else None
            linked = False
            if earlier is not None:
                try:
                    os.link(earlier, path)
                    linked = True
                except OSError:
                    linked = False
            if not linked:
                fd = _create(path)
                try:
                    state["written"] += _write_hashing(fd, frame)
                finally:
                    os.close(fd)
            known[frame.digest] = path
            sizes.add(frame.size)
        entry["digest"] = frame.digest
        state["used"] += frame.size
        entries[members[0]] = entry
        for m in members:
            member_of[m] = members[0]

    def drop(first: str) -> None:
        entry = entries.pop(first)
        state["used"] -= entry["size"]
        for m in entry["members"]:
            member_of.pop(m, None)
        if entry["offset"] is None:
            try:
                os.unlink(os.path.join(tmp, entry["file"]))
            except OSError:
                pass

    try:
        for name, _ in candidates:
            store([name])
        # names that refer to each other in a cycle are pickled together
        graph = {first: set(e["deps"]) for first, e in entries.items()}
        for comp in strongly_connected(graph):
            if len(comp) > 1:
                members = sorted(comp, key=list(values).index)
                for m in members:
                    drop(m)
                store(members)
        # an entry that refers to a name not saved cannot be restored
        changed = True
        while changed:
            changed = False
            for first, entry in list(entries.items()):
                missing = [d for d in entry["deps"] if d not in member_of]
                if missing:
                    drop(first)
                    for m in entry["members"]:
                        why[m] = "refers to %s, which was not saved" % ", ".join(missing)
                    changed = True
    finally:
        if pack_fd[0] is not None:
            os.close(pack_fd[0])
    for name, _ in candidates:
        if name in why:
            skipped.append({"name": name, "reason": why[name]})
    order = {n: i for i, n in enumerate(values)}
    # entries in an order a restore can load them in: what an entry refers to comes first
    graph = {first: {member_of[d] for d in e["deps"]} for first, e in entries.items()}
    ordered = [entries[c[0]] for c in strongly_connected(graph)]
    return {
        "format": FORMAT,
        "id": cid,
        "created": time.time(),
        "storage": folders["kind"],
        "where": folders["mine"],
        "names": sorted_ns["visible"],
        "saved": sorted(member_of, key=order.__getitem__),
        "skipped": skipped,
        "modules": sorted_ns["modules"],
        "entries": ordered,
        "bytes": state["used"],
        "written": state["written"],
    }


def _evict(keep: int, protect: set[str]) -> list[str]:
    """The oldest checkpoints past ``keep`` are removed (never those in ``protect``)."""
    ms = _manifests()
    excess = len(ms) - max(keep, 1)
    gone: list[str] = []
    for m in [m for m in ms if m.get("id") not in protect][: max(0, excess)]:
        shutil.rmtree(m["_dir"], ignore_errors=True)
        gone.append(m["id"])
    if gone:
        _changed()
    return gone


# -- restore ---------------------------------------------------------------------------------------
def _loader(kind: str) -> Any:
    base: Any = pickle.Unpickler
    if kind == "dill":
        import dill

        base = dill.Unpickler

    class Loader(base):  # type: ignore[misc]
        resolve: Any

        def persistent_load(self, pid: Any) -> Any:
            return self.resolve(pid)

    return Loader


def load(shell: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Restore checkpoint ``args['id']`` after checkpointing the present as ``args['undo_id']``."""
    t0 = time.perf_counter()
    target = _find(str(args.get("id", "")))
    if target.get("format") != FORMAT:
        raise Refused("checkpoint %r was written by another version of jupyter-acp" % target.get("id"))
    ns, hidden = _ns_and_hidden(shell)
    undo = save(
        shell,
        {
            "id": args.get("undo_id"),
            "budget": args.get("budget", 1 << 30),
            "storage": args.get("storage", "auto"),
            "keep": args.get("keep", 20),
            "protect": [target["id"]],
            "picklers": args.get("picklers"),
        },
    )
    now_digest = {tuple(e["members"]): e["digest"] for e in undo["entries"]}
    entries = target["entries"]
    # an entry is loaded when its bytes differ now, or when something it refers to is loaded
    reload: set[int] = set()
    first_of = {m: i for i, e in enumerate(entries) for m in e["members"]}
    for i, e in enumerate(entries):
        if now_digest.get(tuple(e["members"])) != e["digest"]:
            reload.add(i)
    changed = True
    while changed:
        changed = False
        for i, e in enumerate(entries):
            if i not in reload and any(first_of.get(d) in reload for d in e["deps"]):
                reload.add(i)
                changed = True
    staged: dict[str, Any] = {}
    failed: dict[str, str] = {}
    kept: list[str] = []

    def resolve(pid: Any) -> Any:
        if pid == ("ns",):
            return ns
        if isinstance(pid, tuple) and len(pid) == 2 and pid[0] == "var":
            name = pid[1]
            if name in staged:
                return staged[name]
            if name in failed:
                raise Refused("refers to %s, which could not be restored" % name)
            if name in ns:
                return ns[name]
        raise pickle.UnpicklingError("unknown reference %r in a checkpoint" % (pid,))

    opened: dict[str, Any] = {}
    try:
        for i, e in enumerate(entries):  # in load order: what an entry refers to comes first
            if i not in reload:
                kept.extend(e["members"])
                continue
            try:
                path = os.path.join(target["_dir"], e["file"])
                fh = opened.get(path)
                if fh is None:
                    fh = opened[path] = open(path, "rb", buffering=0)
                    if e["offset"] is not None:  # the small entries' file: read once, not entry by entry
                        with fh:
                            fh = opened[path] = io.BytesIO(fh.read())
                fh.seek(e["offset"] or 0)
                stream, buffers = read_frame(fh)
                loader = _loader(e["pickler"])(io.BytesIO(stream), buffers=buffers)
                loader.resolve = resolve
                value = loader.load()
                del stream, buffers
                if len(e["members"]) == 1:
                    staged[e["members"][0]] = value
                else:
                    for j, m in enumerate(e["members"]):  # no zip(strict=): the kernel may run Python 3.8
                        staged[m] = value[j]
            except Exception as exc:
                for m in e["members"]:
                    failed[m] = "could not be loaded (%s: %s)" % (type(exc).__name__, str(exc)[:200])
    finally:
        for fh in opened.values():
            fh.close()
    restored: list[str] = []
    for name in kept:
        restored.append(name)
    for name, value in staged.items():
        ns[name] = value
        restored.append(name)
    not_restored = [{"name": n, "reason": r} for n, r in failed.items()]
    for name, module in target.get("modules", {}).items():
        m = sys.modules.get(module)
        if m is None:
            not_restored.append({"name": name, "reason": "module %s is no longer imported in the kernel" % module})
        else:
            ns[name] = m
            restored.append(name)
    saved = set(target["saved"]) | set(target.get("modules", {}))
    for s in target["skipped"]:
        if s["name"] in saved or s["name"].startswith("_"):
            continue
        state = "left as it is now" if s["name"] in ns else "it no longer exists"
        not_restored.append({"name": s["name"], "reason": "not saved by the checkpoint: %s; %s" % (s["reason"], state)})
    then = set(target["names"])
    removed = []
    for name in classify(ns, hidden)["visible"]:
        if name not in then:
            del ns[name]
            removed.append(name)
    order = {n: i for i, n in enumerate(target["names"])}
    restored.sort(key=lambda n: order.get(n, len(order)))
    undo_public = {k: undo[k] for k in ("id", "saved", "skipped", "bytes", "written", "storage", "seconds", "evicted")}
    return {
        "id": target["id"],
        "restored": restored,
        "not_restored": not_restored,
        "removed": removed,
        "undo": undo_public,
        "seconds": round(time.perf_counter() - t0, 4),
    }


def discard(args: dict[str, Any]) -> dict[str, Any]:
    ids = [str(i) for i in args.get("ids") or ()]
    found = {m["id"]: m["_dir"] for m in _manifests()}
    gone, missing = [], []
    for cid in ids:
        if cid in found:
            shutil.rmtree(found[cid], ignore_errors=True)
            gone.append(cid)
        else:
            missing.append(cid)
    _changed()
    return {"discarded": gone, "missing": missing}


def listing() -> dict[str, Any]:
    keys = ("id", "created", "saved", "skipped", "bytes", "written", "storage", "seconds")
    return {"checkpoints": [{k: m.get(k) for k in keys} for m in _manifests()]}


# -- the one entry point -----------------------------------------------------------------------------
PUBLIC = ("id", "saved", "skipped", "bytes", "written", "storage", "seconds", "evicted")


def run(shell: Any, args: dict[str, Any]) -> dict[str, Any]:
    """``{"op": "checkpoint" | "restore" | "discard" | "list", ...}`` -> a JSON-able answer."""
    if sys.version_info < (3, 8):  # noqa: UP036 - this runs in the kernel, whose Python may be older
        raise Refused("checkpoints need Python 3.8 or later in the kernel (pickle protocol 5)")
    op = args.get("op")
    if op == "checkpoint":
        m = save(shell, args)
        return {k: m[k] for k in PUBLIC}
    if op == "restore":
        return load(shell, args)
    if op == "discard":
        return discard(args)
    if op == "list":
        return listing()
    raise Refused("unknown checkpoint operation %r" % op)


class JsonText:
    """A value whose ``repr`` is the JSON text: ``user_expressions`` hands back ``text/plain``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def answer(shell: Any, args: dict[str, Any]) -> JsonText:
    return JsonText(json.dumps(run(shell, args)))
