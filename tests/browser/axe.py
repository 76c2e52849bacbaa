"""axe-core over the agent panel (zero serious violations in every state, light and dark:
the panel is used with a screen reader and the keyboard too).

``axe_violations(page)`` injects ``labextension/node_modules/axe-core/axe.min.js`` (the labextension's
devDependency) and returns the serious and critical violations inside ``root`` (the panel by default);
``assert_accessible(page, state)`` fails with them; ``dark(page)`` / ``light(page)`` switch JupyterLab's theme.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "labextension" / "node_modules" / "axe-core" / "axe.min.js"
PANEL = "#jupyter-acp-sidebar"

#: violations known and accepted, each with its reason (none today)
KNOWN: set[tuple[str, str]] = set()


def axe_violations(page, root: str = PANEL, min_contrast: int = 20) -> list[dict]:
    """Serious and critical axe-core violations inside `root` (the contrast rule must have run on at
    least `min_contrast` nodes there, so the scan is not vacuous)."""
    if not AXE.exists():
        pytest.fail(f"axe-core is a devDependency of the labextension: run `cd labextension && jlpm install` ({AXE})")
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(path=str(AXE))
    # JupyterLab's <body> is 0 px high with overflow hidden (the shell is positioned absolutely), and so is
    # the themed container of the notifications: axe then takes every static element inside for clipped and
    # checks no contrast at all. Such ancestors as high as the window change nothing on screen and let axe see.
    result = page.evaluate(
        """async (root) => {
            const node = document.querySelector(root);
            if (!node) return {missing: true};
            const lifted = [];
            for (let p = node.parentElement; p; p = p.parentElement) {
                if (p === document.body || (p.getBoundingClientRect().height === 0
                        && getComputedStyle(p).overflow !== 'visible')) {
                    lifted.push([p, p.style.height]);
                    p.style.height = '100vh';
                }
            }
            let r;
            try { r = await window.axe.run(node); } finally { for (const [p, h] of lifted) p.style.height = h; }
            const checked = r.passes.find(p => p.id === 'color-contrast');
            const unsure = r.incomplete.find(p => p.id === 'color-contrast');
            return {contrastChecked: checked ? checked.nodes.length : 0,
                contrastUnsure: unsure ? unsure.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary) : [],
                violations: r.violations.map(v => ({id: v.id,
                impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 200),
                    summary: n.failureSummary}))}))};
        }""",
        root,
    )
    assert not result.get("missing"), f"nothing to scan: no element matches {root!r}"
    # the contrast rule saw the text (not only hidden nodes): the scan is not vacuous
    assert result["contrastChecked"] >= min_contrast or result["violations"], "axe checked no contrast: " + json.dumps(
        result
    )
    out = []
    for v in result["violations"]:
        nodes = [n for n in v["nodes"] if (v["id"], n["target"]) not in KNOWN]
        if v["impact"] in ("serious", "critical") and nodes:
            out.append({**v, "nodes": nodes})
    return out


def assert_accessible(page, state: str, root: str = PANEL, min_contrast: int = 10) -> None:
    """No serious or critical axe violation inside `root` in the given `state` (named in the failure); the
    contrast rule ran on at least `min_contrast` nodes (a read-only conversation has no composer)."""
    try:
        violations = axe_violations(page, root, min_contrast)
    except AssertionError as e:
        raise AssertionError(f"axe ({state}): {e}") from None
    assert not violations, f"axe ({state}):\n" + json.dumps(violations, indent=1)


def set_theme(page, dark: bool = True) -> None:
    """Switch JupyterLab's theme and wait until its variables apply."""
    theme = "JupyterLab Dark" if dark else "JupyterLab Light"
    page.evaluate("t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", theme)
    page.wait_for_selector(
        f"body[data-jp-theme-light='{'false' if dark else 'true'}']", state="attached", timeout=60_000
    )
    page.wait_for_timeout(500)  # the theme's variables settle
