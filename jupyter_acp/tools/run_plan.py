"""The run plan: which cells are stale, and in which order to re-run them, from the cells' own sources.

Each code cell is read with Python's ``ast`` (after IPython's own transformation of magics and shell lines)
for the names it *defines* (assignments, imports, ``def``/``class``, augmented and subscript assignments,
a handful of in-place methods) and the names it *uses* (loaded before the cell defines them itself, and the
free names of its functions, which are used when they are called). What ran is the kernel's own history
(``history_request``: the code of each ``In[n]`` of this kernel session), matched to the cells by their
execution counts, so edits the user made since running a cell are seen as well as the agent's.

A cell is in the plan when it
- was edited since it ran (its source is not the code its ``In[n]`` ran), or ran before the kernel restarted;
- uses a name that an earlier cell of the plan (re)defines, from top to bottom;
- ran before a name it uses was redefined by a later execution (run out of order);
- restores a name the plan changes (it defines it again below, so the kernel ends as top-to-bottom would);
- never ran but defines a name a cell of the plan uses (its input).

A cell the analysis cannot see through (``%run``, ``exec``/``eval``, ``globals()``, ``from m import *``, a
magic it does not know, a syntax error) is taken to use and define any name, and the plan says so. The
analysis runs in the server (no code of the notebook runs to make it); its facts per source are cached, so a
plan for a big notebook costs set operations, not parsing.
"""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass, field
from typing import Any

#: names a notebook has without defining them (Python's builtins and what IPython puts in the namespace)
KNOWN_NAMES = frozenset(dir(builtins)) | {"get_ipython", "display", "In", "Out", "exit", "quit", "_", "__", "___"}
#: line magics that define and use no Python name (anything else is uncertain)
PLAIN_LINE_MAGICS = frozenset(
    "matplotlib config load_ext reload_ext unload_ext autoreload aimport pip conda mamba who whos who_ls pwd ls cd "
    "env precision pprint xmode colors lsmagic magic history page pinfo pinfo2 pdoc psource pfile pdef "
    "doctest_mode automagic autocall autoindent alias_magic notebook".split()
)
#: line magics whose argument is Python code run in the namespace
CODE_LINE_MAGICS = frozenset({"time", "timeit", "prun"})
#: cell magics whose body is Python code run in the namespace
CODE_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
#: cell magics whose body is not Python (no names)
PLAIN_CELL_MAGICS = frozenset(
    "bash sh script html HTML markdown javascript js latex svg writefile perl ruby python2 python3 pypy "
    "debug file".split()
)
#: calls that may read or write any name
OPAQUE_CALLS = frozenset({"exec", "eval", "globals", "locals", "vars", "__import__"})
#: methods that change their object in place (``df.drop(..., inplace=True)`` too)
MUTATORS = frozenset(
    "append extend insert remove pop clear sort reverse update setdefault popitem add discard "
    "difference_update intersection_update symmetric_difference_update fill resize put setflags itemset "
    "set_index reset_index".split()
)


@dataclass(frozen=True)
class Facts:
    """What one cell's source defines and uses, and why the analysis may be wrong about it."""

    defines: frozenset[str]
    uses: frozenset[str]
    uncertain: tuple[str, ...] = ()


def _transform(source: str) -> str:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # no IPython in the server: magics stay as they are (and fail to parse: uncertain)
        return source
    return str(TransformerManager().transform_cell(source))  # type: ignore[no-untyped-call]  # IPython is untyped


@functools.lru_cache(maxsize=20_000)
def cell_facts(source: str) -> Facts:
    """The names a cell's source defines and uses (cached by source)."""
    try:
        tree = ast.parse(_transform(source))
    except (SyntaxError, ValueError) as exc:
        return Facts(
            frozenset(),
            frozenset(),
            (f"it does not parse ({type(exc).__name__}: {exc.msg if isinstance(exc, SyntaxError) else exc})",),
        )
    walker = _Walker()
    walker.module(tree.body)
    return Facts(
        frozenset(walker.defines), frozenset(walker.uses - KNOWN_NAMES), tuple(dict.fromkeys(walker.uncertain))
    )


def _base_name(node: ast.AST) -> str | None:
    """``df`` of ``df``, ``df.a``, ``df["a"]``, ``df.a.b[0]``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Walker:
    """The statements in order (blocks too: a loop's target is bound before its body): a name is a use when it
    is loaded before the cell defines it."""

    def __init__(self) -> None:
        self.defines: set[str] = set()
        self.uses: set[str] = set()
        #: what functions and classes of the cell read when they are called (whatever the cell's order)
        self.free: set[str] = set()
        self.uncertain: list[str] = []

    def module(self, body: list[ast.stmt]) -> None:
        self.block(body)
        self.uses |= self.free - self.defines

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def absorb(self, node: ast.AST) -> None:
        loads, stores = self.names(node)
        self.uses |= loads - self.defines
        self.defines |= stores

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, (ast.For, ast.AsyncFor)):
            self.absorb(s.iter)
            self.absorb(s.target)
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.absorb(item.context_expr)
                if item.optional_vars is not None:
                    self.absorb(item.optional_vars)
            self.block(s.body)
        elif isinstance(s, (ast.If, ast.While)):
            self.absorb(s.test)
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self.block(s.body)  # type: ignore[attr-defined]
            for h in s.handlers:  # type: ignore[attr-defined]
                if h.type is not None:
                    self.absorb(h.type)
                if h.name:
                    self.defines.add(h.name)
                self.block(h.body)
            self.block(s.orelse)  # type: ignore[attr-defined]
            self.block(s.finalbody)  # type: ignore[attr-defined]
        elif isinstance(s, ast.Match):
            self.absorb(s.subject)
            for case in s.cases:
                self.absorb(case.pattern)
                if case.guard is not None:
                    self.absorb(case.guard)
                self.block(case.body)
        else:
            self.absorb(s)

    def names(self, top: ast.AST) -> tuple[set[str], set[str]]:
        """(loaded, bound) names of one simple statement or expression in the cell's own scope."""
        loads: set[str] = set()
        stores: set[str] = set()
        todo: list[ast.AST] = [top]
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if not isinstance(node, ast.Lambda):
                    stores.add(node.name)  # defined here; its body runs when it is called
                    todo.extend(node.decorator_list)
                todo.extend(d for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None)
                self.free |= _free_names(node, stores)
                continue
            if isinstance(node, ast.ClassDef):
                stores.add(node.name)
                todo.extend([*node.bases, *(k.value for k in node.keywords), *node.decorator_list])
                self.free |= _free_names(node, stores)
                continue
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                loads |= _free_names(node, stores)
                continue
            todo.extend(ast.iter_child_nodes(node))
            if isinstance(node, ast.Name):
                (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*":
                        self.uncertain.append(f"`from {getattr(node, 'module', '')} import *` may define any name")
                    else:
                        stores.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, (ast.Attribute, ast.Subscript)):
                            base = _base_name(sub)
                            if base:  # df["a"] = ...: df changes in place
                                stores.add(base)
                                loads.add(base)
                if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    loads.add(node.target.id)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                stores.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                stores.add(node.rest)
            elif isinstance(node, ast.Call):
                self.call(node, loads, stores)
        return loads, stores

    def call(self, node: ast.Call, loads: set[str], stores: set[str]) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in OPAQUE_CALLS:
            self.uncertain.append(f"`{func.id}()` may read or write any name")
            return
        if not isinstance(func, ast.Attribute):
            return
        magic = _magic_call(node)
        if magic is not None:
            self.magic(*magic, stores)
            return
        base = _base_name(func.value)
        inplace = any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value for k in node.keywords)
        if base and (func.attr in MUTATORS or inplace):
            stores.add(base)  # df.drop(..., inplace=True), rows.append(x): changed in place
            loads.add(base)

    def magic(self, kind: str, name: str, line: str, body: str, stores: set[str]) -> None:
        if kind == "line":
            if name in PLAIN_LINE_MAGICS:
                return
            if name in CODE_LINE_MAGICS:
                self.nested(line.split(" ", 1)[-1] if line.startswith("-") else line)
                return
            self.uncertain.append(f"`%{name}` may define or use any name")
            return
        if name in PLAIN_CELL_MAGICS:
            return
        if name in CODE_CELL_MAGICS:
            if name == "capture" and line.split():
                stores.add(line.split()[-1])  # %%capture out: defines out
            self.nested(body)
            return
        self.uncertain.append(f"`%%{name}` may define or use any name")

    def nested(self, code: str) -> None:
        facts = cell_facts(code)
        self.uses |= facts.uses - self.defines
        self.defines |= facts.defines
        self.uncertain.extend(facts.uncertain)


def _magic_call(node: ast.Call) -> tuple[str, str, str, str] | None:
    """``get_ipython().run_line_magic('name', 'line')`` / ``run_cell_magic('name', 'line', 'body')``."""
    func = node.func
    if not (
        isinstance(func, ast.Attribute)
        and func.attr in ("run_line_magic", "run_cell_magic")
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "get_ipython"
    ):
        return None
    args = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else "" for a in node.args]
    args += [""] * (3 - len(args))
    return ("line" if func.attr == "run_line_magic" else "cell", args[0], args[1], args[2])


def _free_names(scope: ast.AST, stores: set[str]) -> set[str]:
    """The names a function, lambda, class body or comprehension reads and does not bind itself (its
    ``global`` names are added to ``stores``: calling it may set them)."""
    bound: set[str] = set()
    declared_global: set[str] = set()
    loaded: set[str] = set()
    body: list[ast.AST]
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        bound |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        bound |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        body = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    elif isinstance(scope, ast.ClassDef):
        body = list(scope.body)
    else:
        body = [scope]
    for node in (n for b in body for n in ast.walk(b)):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.Global):
            declared_global |= set(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    stores |= declared_global
    return (loaded - bound) | (loaded & declared_global)


# -- the plan -----------------------------------------------------------------------------------------------
@dataclass
class Step:
    cell_id: str
    index: int
    execution_count: int | None
    why: str  # "edited", "restarted", "uses", "older", "restores", "input"
    names: tuple[str, ...] = ()
    source_cell: str | None = None

    def reason(self) -> str:
        names = ", ".join(f"`{n}`" for n in self.names)
        if self.why == "edited":
            return "edited since it ran"
        if self.why == "restarted":
            return "ran before the kernel restarted (its results are gone)"
        if self.why == "uses" and self.names == (ANY,):
            return f"may use anything {self.source_cell} changed (the analysis cannot see which names)"
        if self.why == "uses":
            return f"uses {names}" + (f" (changed by {self.source_cell})" if self.source_cell else "")
        if self.why == "older":
            return f"ran before {names} was redefined (by {self.source_cell}, which ran later)"
        if self.why == "restores":
            return f"defines {names} again after the plan changes it"
        return f"never ran; defines {names} for {self.source_cell}"


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    uncertain: list[str] = field(default_factory=list)
    never_run: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    history: str = "kernel"

    @property
    def cell_ids(self) -> list[str]:
        return [s.cell_id for s in self.steps]

    def summary(self) -> str:
        """One line: "Run 4 cells: c3 edited; c5, c6, c9 use `df`"."""
        if not self.steps:
            return "Nothing is stale: every cell that ran agrees with its source and with what ran before it"
        groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for s in self.steps:
            groups.setdefault((s.why, s.names), []).append(s.cell_id)
        parts = []
        for (why, names), ids in groups.items():
            who = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
            plural = len(ids) > 1
            quoted = ", ".join(f"`{n}`" for n in names[:4]) + (" …" if len(names) > 4 else "")
            parts.append(
                {
                    "edited": f"{who} edited",
                    "restarted": f"{who} ran before the kernel restarted",
                    "uses": f"{who} may use any name"
                    if names == (ANY,)
                    else f"{who} {'use' if plural else 'uses'} {quoted}",
                    "older": f"{who} ran before {quoted} was redefined",
                    "restores": f"{who} {'define' if plural else 'defines'} {quoted} again",
                    "input": f"{who} never ran and {'define' if plural else 'defines'} {quoted}",
                }[why]
            )
        n = len(self.steps)
        return f"Run {n} cell{'s' if n != 1 else ''}: " + "; ".join(parts)

    def text(self) -> str:
        lines = [self.summary()]
        for n, s in enumerate(self.steps, 1):
            count = f" [In {s.execution_count}]" if s.execution_count is not None else ""
            lines.append(f"{n}. {s.cell_id} (index {s.index}){count}: {s.reason()}")
        if self.uncertain:
            lines.append("Uncertain (the plan takes these to use and define any name):")
            lines += [f"- {u}" for u in self.uncertain]
        if self.warnings:
            lines += [f"Warning: {w}" for w in self.warnings]
        if self.never_run:
            shown = ", ".join(self.never_run[:20]) + (
                f" and {len(self.never_run) - 20} more" if len(self.never_run) > 20 else ""
            )
            lines.append(f"Never run, not needed by the plan: {shown}")
        if self.history != "kernel":
            lines.append(f"Note: {self.history}")
        return "\n".join(lines)

    def structured(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "plan": [
                {
                    "cell_id": s.cell_id,
                    "index": s.index,
                    "execution_count": s.execution_count,
                    "why": s.why,
                    "reason": s.reason(),
                    "names": list(s.names),
                }
                for s in self.steps
            ],
            "uncertain": self.uncertain,
            "warnings": self.warnings,
            "never_run": self.never_run,
            "history": self.history,
        }


def _cid(cell: dict[str, Any]) -> str:
    return str(cell.get("id"))


def _same(a: str, b: str) -> bool:
    return a.rstrip() == b.rstrip()


ANY = "(any name)"


def plan(cells: list[dict[str, Any]], history: dict[int, str] | None, *, history_note: str = "") -> Plan:
    """The run plan of a notebook's cells (nbformat dicts, in order) given the kernel's ``history`` (execution
    count -> the code it ran; None when the kernel could not say: then a cell is taken to be unchanged since it
    ran, and the plan says so)."""
    code = [(i, c) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    facts = {_cid(c): cell_facts(c.get("source") or "") for _, c in code}
    state: dict[str, str] = {}
    old_defines: dict[str, frozenset[str]] = {}
    for _, c in code:
        cid, count, src = _cid(c), c.get("execution_count"), c.get("source") or ""
        if count is None:
            state[cid] = "never"
        elif history is None:
            state[cid] = "ran"
        elif count in history:
            ran = history[count]
            state[cid] = "ran" if _same(ran, src) else "edited"
            if state[cid] == "edited":
                old_defines[cid] = cell_facts(ran).defines
        else:
            state[cid] = "restarted"
    # who gave each name its value now: the latest execution (by count) of a cell that defines it
    provider: dict[str, tuple[int, str]] = {}
    for _, c in code:
        cid, count = _cid(c), c.get("execution_count")
        if state[cid] in ("ran", "edited") and count is not None:
            for name in facts[cid].defines | old_defines.get(cid, frozenset()):
                if name not in provider or provider[name][0] < count:
                    provider[name] = (count, cid)

    forced: dict[str, tuple[tuple[str, ...], str]] = {}
    for _ in range(8):  # never-ran inputs added until nothing more is needed (a few rounds at most)
        steps = _walk(code, facts, state, old_defines, provider, forced)
        needed = _inputs(code, facts, state, steps, forced)
        if not needed:
            break
        forced.update(needed)
    out = Plan(steps=steps)
    if history is None:
        out.history = history_note or (
            "the kernel's history could not be read: a cell is taken to be unchanged since it last ran"
        )
    planned = {s.cell_id for s in steps}
    first = steps[0].index if steps else None
    defined_above: set[str] = set()
    defined_where: dict[str, str] = {}
    for _, c in code:
        for name in facts[_cid(c)].defines:
            defined_where.setdefault(name, _cid(c))
    for i, c in code:
        cid = _cid(c)
        f = facts[cid]
        if f.uncertain and first is not None and i >= first:
            out.uncertain.append(f"{cid}: " + "; ".join(f.uncertain))
        if state[cid] == "never" and cid not in planned:
            out.never_run.append(cid)
        if cid in planned:
            later = sorted(n for n in f.uses - defined_above if n in defined_where and defined_where[n] != cid)
            if later and len(out.warnings) < 10:
                names = ", ".join(f"`{n}`" for n in later[:4])
                out.warnings.append(f"{cid} uses {names}, defined only in cells below it: top to bottom it would fail")
        defined_above |= f.defines
    return out


def _walk(
    code: list[tuple[int, dict[str, Any]]],
    facts: dict[str, Facts],
    state: dict[str, str],
    old_defines: dict[str, frozenset[str]],
    provider: dict[str, tuple[int, str]],
    forced: dict[str, tuple[tuple[str, ...], str]],
) -> list[Step]:
    dirty: dict[str, str] = {}  # name -> the planned cell that changes it
    anything: str | None = None  # a planned cell the analysis cannot see through: any name may change
    steps: list[Step] = []
    for i, c in code:
        cid, count = _cid(c), c.get("execution_count")
        f = facts[cid]
        st = state[cid]
        step: Step | None = None
        if st == "edited":
            step = Step(cid, i, count, "edited")
        elif st == "restarted":
            step = Step(cid, i, count, "restarted")
        elif cid in forced:
            names, user = forced[cid]
            step = Step(cid, i, count, "input", names, user)
        elif st == "ran":
            if anything is not None and (f.uses or f.uncertain):
                step = Step(cid, i, count, "uses", (ANY,), anything)
            elif f.uncertain and dirty:
                step = Step(cid, i, count, "uses", (ANY,), next(iter(dirty.values())))
            else:
                hit = sorted(f.uses & dirty.keys())
                if hit:
                    step = Step(cid, i, count, "uses", tuple(hit), dirty[hit[0]])
                else:
                    older = sorted(
                        n for n in f.uses if n in provider and provider[n][1] != cid and provider[n][0] > (count or 0)
                    )
                    if older:
                        step = Step(cid, i, count, "older", tuple(older), provider[older[0]][1])
                    else:
                        again = sorted(f.defines & dirty.keys())
                        if again:
                            step = Step(cid, i, count, "restores", tuple(again))
        if step is None:
            continue
        steps.append(step)
        if step.why == "restores":
            for name in f.defines:
                dirty.pop(name, None)
            continue
        for name in f.defines | old_defines.get(cid, frozenset()):
            dirty[name] = cid
        if f.uncertain:
            anything = cid
    return steps


def _inputs(
    code: list[tuple[int, dict[str, Any]]],
    facts: dict[str, Facts],
    state: dict[str, str],
    steps: list[Step],
    forced: dict[str, tuple[tuple[str, ...], str]],
) -> dict[str, tuple[tuple[str, ...], str]]:
    """Never-ran cells that define what a planned cell uses (the nearest definition above it)."""
    planned = {s.cell_id for s in steps}
    position = {_cid(c): k for k, (_, c) in enumerate(code)}
    needed: dict[str, tuple[list[str], str]] = {}
    for s in steps:
        for name in sorted(facts[s.cell_id].uses):
            for k in range(position[s.cell_id] - 1, -1, -1):
                other = _cid(code[k][1])
                if name in facts[other].defines:
                    if state[other] == "never" and other not in planned and other not in forced:
                        needed.setdefault(other, ([], s.cell_id))[0].append(name)
                    break
    return {cid: (tuple(names), user) for cid, (names, user) in needed.items()}
