"""The read-only summariser that runs *inside* the kernel.

This module is never imported by the kernel: its source (``kernel_source()``) is sent with each request
and run in a throw-away namespace, so it works in kernels that do not have ``jupyter_acp`` installed
(a gateway kernel on a cluster node).  It only reads the user's namespace, never assigns into it.

It is also an ordinary module: the server-side tests import it and call ``summarise`` on real values.
Keep it self-contained (standard library at the top, optional libraries imported where used).
"""

import json
import reprlib
import types

HIDDEN = {"In", "Out", "exit", "quit", "get_ipython", "open"}


def _repr(budget=160):
    r = reprlib.Repr()
    r.maxstring = 160
    r.maxother = 160
    r.maxlist = 8
    r.maxtuple = 8
    r.maxdict = 8
    r.maxset = 8
    r.maxlevel = 3
    return r


_R = _repr()


def short(v, n=160):
    try:
        s = _R.repr(v)
    except Exception as e:
        s = "<repr failed: %s>" % type(e).__name__
    return s if len(s) <= n else s[:n] + "…"


def tname(v):
    t = type(v)
    m = t.__module__
    return t.__qualname__ if m in ("builtins", "__main__") else m.split(".")[0] + "." + t.__qualname__


def _pandas_numpy(v, out, args, budget):
    """DataFrame, Series, ndarray: True when summarised here."""
    mod = type(v).__module__ or ""
    kind = type(v).__name__
    if mod.startswith("pandas") and kind == "DataFrame":
        import pandas as pd

        out["kind"] = "dataframe"
        out["shape"] = list(v.shape)
        cols = list(v.columns[:50])
        out["dtypes"] = {str(c): str(v.dtypes[c]) for c in cols}
        if v.shape[1] > 50:
            out["columns_omitted"] = int(v.shape[1] - 50)
        out["memory_bytes"] = int(v.memory_usage(index=True, deep=False).sum())
        with pd.option_context("display.max_columns", 20, "display.width", 200, "display.max_colwidth", 40):
            out["head"] = v.head(5).to_string()[:budget]
            if args.get("describe", True) and v.shape[0] * max(v.shape[1], 1) <= 50_000_000:
                try:
                    out["describe"] = v.describe().to_string()[:budget]
                except Exception:
                    pass
        return True
    if mod.startswith("pandas") and kind == "Series":
        out["kind"] = "series"
        out["length"] = int(len(v))
        out["dtype"] = str(v.dtype)
        out["name"] = short(v.name, 80)
        out["head"] = v.head(5).to_string()[:budget]
        return True
    if mod.startswith("numpy") and kind == "ndarray":
        out["kind"] = "ndarray"
        out["shape"] = list(v.shape)
        out["dtype"] = str(v.dtype)
        out["nbytes"] = int(v.nbytes)
        if v.size and v.dtype.kind in "biuf":
            import numpy as np

            out["min"] = float(np.nanmin(v))
            out["max"] = float(np.nanmax(v))
            out["mean"] = float(np.nanmean(v))
        out["preview"] = short(v.ravel()[:8].tolist(), 300)
        return True
    return False


def summary(v, args=None):
    """A bounded description of one value: never the value whole."""
    args = args or {}
    budget = int(args.get("budget", 2000))
    out = {"type": tname(v)}
    try:
        if _pandas_numpy(v, out, args, budget):
            return out
    except Exception as e:
        out["summary_error"] = "%s: %s" % (type(e).__name__, str(e)[:200])
    if isinstance(v, str):
        out["kind"] = "str"
        out["length"] = len(v)
        out["value"] = v[:budget]
    elif isinstance(v, (bytes, bytearray)):
        out["kind"] = "bytes"
        out["length"] = len(v)
        out["value"] = short(bytes(v[:budget]), budget)
    elif isinstance(v, dict):
        out["kind"] = "mapping"
        out["length"] = len(v)
        out["items"] = [[short(k, 80), short(x, 160)] for k, x in list(v.items())[:10]]
    elif isinstance(v, (list, tuple, set, frozenset)):
        out["kind"] = "sequence"
        out["length"] = len(v)
        out["items"] = [short(x, 160) for x in list(v)[:10]]
    elif isinstance(v, (int, float, complex, bool)) or v is None:
        out["kind"] = "scalar"
        out["value"] = short(v, budget)
    elif isinstance(v, types.ModuleType):
        out["kind"] = "module"
        out["value"] = getattr(v, "__name__", "?")
    elif callable(v):
        out["kind"] = "callable"
        try:
            import inspect

            out["signature"] = str(inspect.signature(v))[:300]
        except Exception:
            pass
        doc = getattr(v, "__doc__", None)
        if isinstance(doc, str):
            out["doc"] = doc.strip()[:300]
    else:
        out["kind"] = "object"
    if "value" not in out and out.get("kind") not in ("dataframe", "series", "ndarray"):
        out["repr"] = short(v, min(budget, 500))
    return out


def list_names(ns):
    rows = []
    for k, v in list(ns.items()):
        if k.startswith("_") or k in HIDDEN or isinstance(v, types.ModuleType):
            continue
        rows.append({"name": k, "type": tname(v), "value": short(v)})
    return {"variables": rows}


def resolve(ns, dotted):
    """(value, None) or (None, error): plain attributes only, never a property's code."""
    path = dotted.split(".")
    if path[0] not in ns:
        return None, "name %r is not defined in the kernel" % path[0]
    v = ns[path[0]]
    for i, part in enumerate(path[1:], 1):
        if isinstance(getattr(type(v), part, None), property):
            return None, "%s is a property; only plain attributes are read" % part
        try:
            v = getattr(v, part) if isinstance(v, types.ModuleType) else object.__getattribute__(v, part)
        except AttributeError:
            return None, "%r has no attribute %r" % (".".join(path[:i]), part)
    return v, None


def summarise(ns, args):
    """The one entry point: ``{"op": "list"}`` or ``{"op": "inspect", "name": ..., "budget": ...}``."""
    if args.get("op") == "list":
        return list_names(ns)
    v, error = resolve(ns, args["name"])
    if error is not None:
        return {"error": error}
    return {"name": args["name"], **summary(v, args)}


class JsonText:
    """A value whose ``repr`` is the JSON text: ``user_expressions`` hands back ``text/plain``."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def answer(ns, args):
    return JsonText(json.dumps(summarise(ns, args), default=str))
