"""The same sidebar in Notebook 7: View > Right Sidebar > Agent, a prompt, the streamed answer."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

from jupyter_acp.testing.server import ServerProcess

pytestmark = pytest.mark.skipif(importlib.util.find_spec("notebook") is None, reason="Notebook 7 is not installed")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def notebook7(tmp_path):
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "jupyter-acp-host").symlink_to(REPO / "jupyter_acp" / "labextension")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, root / "seven.ipynb")
    server = ServerProcess(root, data, extra_args=["--JupyterACP.default_agent=echo"])
    server.start()
    yield server
    server.stop()


def show_agent(page) -> None:
    """View > Right Sidebar > Show Agent. The submenu lists the right area's widgets when it opens: a menu opened
    before the extension has added its panel (a busy machine loads the page's plugins later than the notebook) lists
    none, and stays so while open, so it is opened again (the panel missing after a minute still fails)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(6):
        page.get_by_role("menuitem", name="View").click()
        page.locator(".lm-Menu-itemLabel", has_text="Right Sidebar").first.hover()
        try:
            page.locator(".lm-Menu-itemLabel", has_text="Show Agent").last.click(timeout=10_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            page.keyboard.press("Escape")
    raise AssertionError("View > Right Sidebar never listed Show Agent (the extension's panel was not added)")


def test_sidebar_in_notebook_7(browser, notebook7):
    page = browser.new_page(viewport={"width": 1300, "height": 800})
    try:
        page.goto(f"{notebook7.base}/notebooks/seven.ipynb?token={notebook7.token}")
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        show_agent(page)
        box = page.locator(".jp-ACP-panel textarea")
        box.wait_for(timeout=30_000)
        box.fill("hello from notebook seven")
        box.press("Enter")
        from playwright.sync_api import expect

        # the prompt bubble at once, then the echoed answer once the agent has started and streamed
        said = page.locator(".jp-ACP-panel").get_by_text("hello from notebook seven", exact=True)
        expect(said).to_have_count(2, timeout=60_000)
        page.screenshot(path=str(REPO / "test-artifacts" / "browser" / "notebook7.png"))
    finally:
        page.close()
