"""Images in the prompt, in a real JupyterLab: a pasted screenshot (a synthetic ClipboardEvent carrying a
File in its DataTransfer) and a plot attached from a cell's output (the output's context menu), sent to the
echo agent (which describes the images it got), shown as thumbnails in the user's message, and again after a
reload (replayed from the server); an agent without image support gets the chip disabled with the reason.
"""

from __future__ import annotations

import base64
import math
import re
import shutil
import struct
import zlib

import nbformat
import pytest
from conftest import REPO

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
SCREENS = REPO / "test-artifacts" / "screens"


def png_rgb(width: int, height: int, pixel) -> bytes:
    """A PNG from ``pixel(x, y) -> (r, g, b)`` (no imaging library on the machine)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = bytearray()
    for y in range(height):
        rows.append(0)
        for x in range(width):
            rows.extend(pixel(x, y))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )


def plot_png() -> bytes:
    """A small line plot: axes and a sine curve, as matplotlib would draw one."""
    w, h = 320, 200
    curve = {x: int(100 - 70 * math.sin((x - 30) / 280 * 2 * math.pi)) for x in range(30, 310)}

    def pixel(x: int, y: int) -> tuple[int, int, int]:
        if (x == 30 and 10 <= y <= 180) or (y == 180 and 30 <= x <= 310):
            return (40, 40, 40)
        if x in curve and abs(curve[x] - y) <= 1:
            return (31, 119, 180)
        return (255, 255, 255)

    return png_rgb(w, h, pixel)


def screenshot_png() -> bytes:
    """A big "screenshot" (2400 px wide: the panel scales it down before it is sent)."""
    return png_rgb(2400, 1200, lambda x, y: ((x // 8) % 256, (y // 5) % 256, 160))


PASTE = """([box, b64]) => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], 'screenshot.png', { type: 'image/png' }));
  const event = new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true });
  box.dispatchEvent(event);
  return event.defaultPrevented;
}"""


DROP = """([zone, b64]) => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], 'chart.png', { type: 'image/png' }));
  zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
  const drop = new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true });
  zone.dispatchEvent(drop);
  return drop.defaultPrevented;
}"""


def notebook_with_plot(ui, name: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cell = nbformat.v4.new_code_cell("plt.plot(x, np.sin(x))")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"image/png": base64.b64encode(plot_png()).decode(), "text/plain": "<Figure size 320x200>"},
        )
    ]
    cell.execution_count = 1
    nb.cells.append(cell)
    (ui.lab.root / name).write_text(nbformat.writes(nb))
    return name


def shot(ui, label: str, full: bool = False) -> None:
    path = ui.shot(label, full=full)
    SCREENS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENS / f"b6-{label}.png")


def test_paste_attach_plot_and_thumbnails(ui):
    nb = notebook_with_plot(ui, "images.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.widen_panel(200)
    panel, page = ui.panel, ui.page
    box = panel.get_by_label("Message to the agent")
    chip = panel.locator(".jp-ACP-imageChip")
    expect(chip).to_be_enabled(timeout=LONG)

    # paste a big screenshot: it waits above the input, scaled down (at most 1568 px a side)
    assert page.evaluate(PASTE, [box.element_handle(), base64.b64encode(screenshot_png()).decode()])
    thumbs = panel.locator(".jp-ACP-imageThumb")
    expect(thumbs).to_have_count(1, timeout=LONG)
    expect(thumbs.first).to_have_attribute("title", re.compile(r"pasted screenshot\.png: JPEG, 1568×784, scaled"))

    # right-click the plot: "Attach to Agent Prompt"
    page.locator(".jp-OutputArea-output img").first.click(button="right")
    expect(page.locator(".lm-Menu-itemLabel", has_text="Attach to Agent Prompt")).to_be_visible()
    shot(ui, "attach-menu", full=True)
    page.locator(".lm-Menu-itemLabel", has_text="Attach to Agent Prompt").click()
    expect(thumbs).to_have_count(2, timeout=LONG)
    expect(thumbs.nth(1)).to_have_attribute("title", re.compile(r"output of cell 1: PNG, 320×200"))
    box.fill("What do these show?")
    shot(ui, "image-tray")

    # a dropped image joins them; a thumbnail can be removed
    composer = panel.locator(".jp-ACP-composer")
    assert page.evaluate(DROP, [composer.element_handle(), base64.b64encode(plot_png()).decode()])
    expect(thumbs).to_have_count(3, timeout=LONG)
    expect(thumbs.nth(2)).to_have_attribute("title", re.compile(r"dropped chart\.png: PNG, 320×200"))
    thumbs.nth(2).locator(".jp-ACP-imageRemove").click()
    expect(thumbs).to_have_count(2)

    box.press("Enter")
    expect(thumbs).to_have_count(0)
    answer = panel.locator(".jp-ACP-message").last
    expect(answer).to_contain_text("What do these show?", timeout=LONG)
    expect(answer).to_contain_text(re.compile(r"\[image: image/jpeg, \d+ bytes\] \[image: image/png, \d+ bytes\]"))
    user = panel.locator(".jp-ACP-user").last
    expect(user.locator(".jp-ACP-userImage")).to_have_count(2)
    expect(user.locator(".jp-ACP-userText")).to_have_text("What do these show?")
    # the thumbnails are the images that were sent (decoded by the browser, not broken)
    sizes = user.locator(".jp-ACP-userImage").evaluate_all("imgs => imgs.map(i => [i.naturalWidth, i.naturalHeight])")
    assert sizes == [[1568, 784], [320, 200]]
    shot(ui, "thumbnails-sent")

    # click enlarges
    user.locator(".jp-ACP-userImage").nth(1).click()
    expect(user.locator(".jp-ACP-userImage").nth(1)).to_have_class(re.compile("jp-mod-expanded"))
    shot(ui, "thumbnail-enlarged")

    # after a reload the conversation is replayed from the server, thumbnails included
    ui.open_lab(nb)
    ui.wait_ready("echo")
    user = ui.panel.locator(".jp-ACP-user").last
    expect(user.locator(".jp-ACP-userImage")).to_have_count(2, timeout=LONG)
    sizes = user.locator(".jp-ACP-userImage").evaluate_all("imgs => imgs.map(i => [i.naturalWidth, i.naturalHeight])")
    assert sizes == [[1568, 784], [320, 200]]


def test_agent_without_images_disables_the_chip(ui):
    nb = notebook_with_plot(ui, "noimages.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("perm")  # a scripted agent: no promptCapabilities.image
    ui.widen_panel(200)
    panel, page = ui.panel, ui.page
    chip = panel.locator(".jp-ACP-imageChip")
    panel.get_by_label("Message to the agent").focus()  # the chip is drawn again on focus
    expect(chip).to_be_disabled(timeout=LONG)
    expect(chip).to_have_attribute("title", re.compile(r"does not take images.*promptCapabilities\.image"))
    # pasting an image says why nothing was attached
    box = panel.get_by_label("Message to the agent")
    page.evaluate(PASTE, [box.element_handle(), base64.b64encode(plot_png()).decode()])
    expect(panel.locator(".jp-ACP-imageThumb")).to_have_count(0)
    expect(panel).to_contain_text("does not take images", timeout=LONG)
    # and the plot's context-menu item is disabled, saying so
    page.locator(".jp-OutputArea-output img").first.click(button="right")
    item = page.locator(".lm-Menu-item", has_text="the agent takes no images")
    expect(item).to_have_attribute("aria-disabled", "true")
    shot(ui, "attach-menu-disabled", full=True)
    page.keyboard.press("Escape")
    expect(item).to_have_count(0)
    shot(ui, "chip-disabled")


def test_a_plot_from_the_builtin_agents_tool_shows_in_its_card(ui):
    """The built-in agent runs a cell that draws a plot; the plot is in the tool card."""
    plot = base64.b64encode(plot_png()).decode()
    source = (
        f"from IPython.display import Image, display\nimport base64\ndisplay(Image(data=base64.b64decode('{plot}')))"
    )
    nb = ui.lab.notebook("toolplot.ipynb", [source], ids=["cell-run"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("builtin")
    ui.widen_panel(200)
    panel = ui.panel
    ui.send("run the first cell")  # the fake model answers with client_execute_cells on cell-run
    # the client's gate asks on the agent's own card of that call (one card per call), in its own words
    asking = panel.locator(".jp-ACP-tool.jp-mod-asking", has_text="Run cell cell-run")
    expect(asking.locator(".jp-ACP-permissionQuestion")).to_contain_text("in the kernel", timeout=LONG)
    asking.get_by_role("button", name=re.compile("^Allow once")).click(timeout=LONG)
    card = panel.locator(".jp-ACP-tool", has_text="Run cell cell-run")
    expect(card).to_have_attribute("data-status", "completed", timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("Done", timeout=LONG)
    images = panel.locator(".jp-ACP-tool img")
    expect(images).to_have_count(1)  # once: not again from the raw output, no broken image
    expect(panel.locator(".jp-ACP-tool")).to_have_count(1)  # the gate's question did not add a second card
    assert images.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [320, 200]
    shot(ui, "tool-card-plot")
