"""Figures and rich outputs in one process (matplotlib's Agg backend, an InteractiveShell): capture by the
``python`` tool, images from ``read_file`` and ``notebook_read``, the asset store, the wire formats, the
image cap, and the renderings of a turn."""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import threading
from pathlib import Path

import nbformat
import pytest
from fakeopenai import Call, Reply
from IPython.core.interactiveshell import InteractiveShell
from nbformat.v4 import new_code_cell, new_notebook, new_output

from shiro_kernel.context.cell_changes import block, fingerprint
from shiro_kernel.context.estimate import estimate_tokens
from shiro_kernel.context.limits import IMAGE_SLACK, KEEP_IMAGES, limit_images
from shiro_kernel.provider import Provider, ProviderSettings, wire
from shiro_kernel.session import Session
from shiro_kernel.store.assets import assets
from shiro_kernel.store.records import session_from_record, session_to_record
from shiro_kernel.tools import ToolContext, all_tools, run_tool
from shiro_kernel.tools.python_tool import run_python
from shiro_kernel.transcript import ImageRef, Message, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.turn import Turn, TurnOptions
from shiro_kernel.ui import outputs
from shiro_kernel.ui.render import TurnLog, to_bundle_json, to_html, to_markdown, to_text

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def shell(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    sh = InteractiveShell.instance()
    yield sh
    import matplotlib.pyplot as plt

    plt.close("all")
    InteractiveShell.clear_instance()


def open_figures() -> list[int]:
    import matplotlib.pyplot as plt

    return plt.get_fignums()


def png_of(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


# -- capture ----------------------------------------------------------------------------------------
def test_plt_show_is_captured_once_described_and_closed(shell):
    out = run_python(
        shell,
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\n"
        "plt.title('squares'); plt.xlabel('x')\nplt.show()",
    )
    assert len(out.images) == 1 and out.images[0].data.startswith(PNG)
    assert (
        "title 'squares'" in out.images[0].alt and "x 'x' from" in out.images[0].alt and "1 series" in out.images[0].alt
    )
    assert out.text.startswith("[figure: matplotlib figure")
    assert len(out.displays) == 1 and "image/png" in out.displays[0]["data"]
    assert open_figures() == []  # nothing left for the inline backend to flush into the next cell


def test_a_figure_as_the_last_expression_and_an_unshown_figure(shell):
    out = run_python(shell, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar([1, 2], [3, 4])\nfig")
    assert len(out.images) == 1 and len(out.displays) == 1  # once, not twice
    out = run_python(shell, "plt.figure(); plt.plot([0, 1]); plt.figure(); plt.scatter([1], [2]); None")
    assert len(out.images) == 2 and open_figures() == []  # never shown: rendered, then closed


def test_figures_the_user_had_open_are_left_alone(shell):
    run_python(shell, "import matplotlib.pyplot as plt")
    import matplotlib.pyplot as plt

    mine = plt.figure()
    out = run_python(shell, "print('no plotting here')")
    assert out.images == [] and plt.fignum_exists(mine.number)


def test_dataframe_display_and_last_value_go_to_the_user_as_html(shell):
    pd = pytest.importorskip("pandas")
    shell.user_ns["pd"] = pd
    out = run_python(shell, "df = pd.DataFrame({'a': [1, 2]})\ndisplay(df.describe())\ndf")
    assert out.images == []
    assert [sorted(d["data"]) for d in out.displays] == [["text/html", "text/plain"]] * 2
    # the model reads the text/plain: the display's, then the last value's
    assert out.text == str(pd.DataFrame({"a": [1, 2]}).describe()) + "\n   a\n0  1\n1  2"


def test_a_huge_display_is_left_out_with_a_note(shell):
    out = run_python(shell, "from IPython.display import HTML\ndisplay(HTML('x' * 6_000_000))\n'done'")
    assert out.displays == [] and "left out of this turn's view" in out.text


# -- images from files and the notebook -----------------------------------------------------------
def test_read_file_of_an_image_and_a_fifo_that_never_blocks(tmp_path):
    (tmp_path / "plot.png").write_bytes(png_of(40, 20))
    ctx = ToolContext(root=tmp_path)
    result = run_tool(all_tools(), ToolCallPart("c1", "read_file", json.dumps({"path": "plot.png"})), ctx)
    assert not result.is_error and len(result.images) == 1 and result.images[0].width == 40
    os.mkfifo(tmp_path / "pipe")
    done = threading.Event()

    def read() -> None:
        result = run_tool(all_tools(), ToolCallPart("c2", "read_file", json.dumps({"path": "pipe"})), ctx)
        assert result.is_error and "not a regular file" in result.output
        grep = run_tool(all_tools(), ToolCallPart("c3", "grep", json.dumps({"pattern": "x"})), ctx)
        assert not grep.is_error
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10), "a file tool blocked on a FIFO"


def test_notebook_read_attaches_a_cells_plot_when_asked(tmp_path):
    nb = new_notebook(
        cells=[
            new_code_cell(
                "plot()",
                outputs=[
                    new_output(
                        "display_data",
                        data={"image/png": base64.b64encode(png_of(30, 30)).decode(), "text/plain": "<Figure>"},
                    )
                ],
            )
        ]
    )
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    ctx = ToolContext(root=tmp_path, notebook_path=path)
    plain = run_tool(all_tools(), ToolCallPart("c", "notebook_read", json.dumps({"cells": [0]})), ctx)
    assert plain.images == [] and "<image/png>" in plain.output
    seen = run_tool(all_tools(), ToolCallPart("c", "notebook_read", json.dumps({"cells": [0], "images": True})), ctx)
    assert len(seen.images) == 1 and "cell [0] output" in seen.output


# -- the model's copy: downscaled, stored by hash, kept out of the record ---------------------------
def test_images_are_downscaled_stored_by_hash_and_referenced_from_the_record(tmp_path):
    from shiro_kernel.tools.base import Effect, Image, Tool, ToolOutput, schema

    big = png_of(2400, 1600)
    tool = Tool(
        "pic",
        "a picture",
        schema({}),
        lambda args, ctx: ToolOutput("a picture", [Image(big, "image/png")]),
        effects=Effect.READS,
    )
    part = run_tool({"pic": tool}, ToolCallPart("c", "pic", "{}"), ToolContext(root=tmp_path))
    ref = part.images[0]
    assert (ref.width, ref.height) == (1024, 683)
    stored = assets().get(ref)
    assert stored is not None and stored.startswith(PNG) and len(stored) < len(big)
    session = Session(
        messages=[Message.user("go"), Message("assistant", [ToolCallPart("c", "pic", "{}")]), Message("tool", [part])]
    )
    record = session_to_record(session, "m")
    text = json.dumps(record)
    assert base64.b64encode(stored[:30]).decode() not in text and len(text) < 2_000
    back = session_from_record(record)
    assert back.messages[2].parts[0].images == [ref]  # a resumed session still has its figure


# -- the wire -------------------------------------------------------------------------------------
def _ref() -> ImageRef:
    return assets().put(png_of(10, 10), "image/png", alt="a red square")


def _history(ref: ImageRef) -> list[Message]:
    return [
        Message.user("plot"),
        Message("assistant", [ToolCallPart("c1", "python", '{"code": "p()"}')]),
        Message("tool", [ToolResultPart("c1", "python", "[figure]", images=[ref])]),
        Message("assistant", [ToolCallPart("c2", "python", '{"code": "q()"}')]),
        Message("tool", [ToolResultPart("c2", "python", "done")]),
    ]


def test_responses_carries_input_image_parts_and_text_without_vision():
    ref = _ref()
    items = wire.responses_input(_history(ref), store=False, images=assets().data_url)
    output = items[2]["output"]
    assert output[0] == {"type": "input_text", "text": "[figure]"}
    assert output[1]["type"] == "input_image" and output[1]["image_url"].startswith("data:image/png;base64,")
    plain = wire.responses_input(_history(ref), store=False, images=None)
    assert plain[2]["output"] == "[figure]\n[image not shown (this model takes no images): a red square]"


def test_the_input_cache_builds_each_message_once_and_matches_the_plain_conversion():
    """A long session's request reuses each unchanged message's items (the same objects); a changed
    message, another ``store`` or a result with images is built again, and the request is always exactly
    what :func:`wire.responses_input` gives."""
    ref = _ref()
    history = _history(ref)
    history[3].parts[0].item_id = "fc_2"  # an id: its item depends on ``store``
    cache = wire.InputCache()
    source = assets().data_url

    def check(store: bool, images=source) -> list:
        items = cache.input(history, store=store, images=images)
        assert items == wire.responses_input(history, store=store, images=images)
        return items

    first = check(True)
    again = check(True)
    assert again[0] is first[0] and again[1] is first[1]  # unchanged messages: built once
    assert again[2] is not first[2]  # the result with an image: built every time (the image store decides)
    assert check(False)[3] == {
        "type": "function_call",
        "call_id": "c2",
        "name": "python",
        "arguments": '{"code": "q()"}',
    }  # store off: inline, not the stored reference
    assert check(True)[3] == {"type": "item_reference", "id": "fc_2"}
    history[1].parts[0] = ToolCallPart("c1", "python", '{"code": "plot()"}')  # a part replaced
    assert json.loads(check(True)[1]["arguments"]) == {"code": "plot()"}
    history.append(Message.user("more"))
    assert check(True)[-1] == {"role": "user", "content": "more"}
    assert check(True, images=None)[2]["output"].endswith(
        "[image not shown (this model takes no images): a red square]"
    )


def test_the_input_cache_gives_chat_completions_exactly_the_plain_conversion():
    """The Chat Completions request from kept entries: the same as :func:`wire.chat_messages`, with the
    images of a step in one ``user`` message after its tool messages, and unchanged messages built once."""
    ref = _ref()
    history = _history(ref) + [Message.user("and now?"), Message("assistant", [TextPart("done")])]
    cache = wire.InputCache()
    source = assets().data_url

    def check(images=source) -> list:
        entries = cache.chat("sys", history, images)
        assert entries == wire.chat_messages("sys", history, images=images)
        assert not any("_shiro_images" in e for e in entries)
        return entries

    first = check()
    assert [m["role"] for m in first] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    again = check()
    assert again[1] is first[1] and again[5] is first[5]  # unchanged messages: their entries built once
    plain = check(images=None)  # no images: their text stand-ins, no extra user message
    assert [m["role"] for m in plain] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    history[-1] = Message("assistant", [TextPart("changed")])
    assert check()[-1] == {"role": "assistant", "content": "changed"}


def test_chat_sends_images_in_one_user_message_after_the_tool_messages():
    msgs = wire.chat_messages("sys", _history(_ref()), images=assets().data_url)
    roles = [m["role"] for m in msgs]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant", "tool"]
    assert msgs[3]["content"] == "[figure]"
    assert msgs[4]["content"][0]["text"] == "Images from the tool results above: python (c1)"
    assert msgs[4]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_only_the_newest_images_go_out_and_each_costs_its_estimate():
    history = [Message.user("go")]
    for i in range(10):
        ref = ImageRef(f"{i:064x}", "image/png", 100, 100, f"figure {i}")
        history += [
            Message("assistant", [ToolCallPart(f"c{i}", "python", "{}")]),
            Message("tool", [ToolResultPart(f"c{i}", "python", f"plot {i}", images=[ref])]),
        ]
    wire_copy, dropped = limit_images(history)
    kept = [p for m in wire_copy for p in m.tool_results() if p.images]
    assert dropped == 10 - KEEP_IMAGES and [p.output for p in kept] == ["plot 7", "plot 8", "plot 9"]
    assert "[image left out of this request to save context: figure 0]" in wire_copy[2].parts[0].output
    assert all(p.images for m in history for p in m.tool_results())  # the history itself keeps them all
    assert estimate_tokens(history) - estimate_tokens(wire_copy) > 800 * (10 - KEEP_IMAGES) * 0.9


# -- a 30-step session that plots every step --------------------------------------------------------
def test_thirty_plots_each_request_carries_at_most_the_newest_few(shell, fake_openai, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]); plt.title('step'); plt.show()"
    fake_openai.enqueue(
        *[Reply(tool_calls=[Call("python", {"code": code})]) for _ in range(30)], Reply(text="thirty plots")
    )
    session = Session()
    provider = Provider(ProviderSettings(model="gpt-4o-mini", base_url=fake_openai.base_url, max_retries=0))
    provider.images = assets().data_url
    ctx = ToolContext(root=tmp_path, shell=shell)
    end = Turn(session, provider, all_tools(), ctx, "", TurnOptions(approval="auto", max_steps=40)).run("go")
    assert end.reason == "answered"
    counts = [
        sum(
            1
            for i in r.body["input"]
            if isinstance(i.get("output"), list)
            for p in i["output"]
            if p["type"] == "input_image"
        )
        for r in fake_openai.requests
    ]
    # images are held still for the prefix cache: a request carries up to KEEP_IMAGES + IMAGE_SLACK, then the
    # older ones go at once, down to the newest KEEP_IMAGES; so the count drops only every few figures
    assert max(counts) == KEEP_IMAGES + IMAGE_SLACK
    drops = [n for n, (a, b) in enumerate(itertools.pairwise(counts)) if b < a]
    assert drops and all(counts[n + 1] == KEEP_IMAGES for n in drops)
    assert len(drops) <= 30 // IMAGE_SLACK + 1
    # about 33 kB a figure: at most the held ones travel, never all 30 (~1 MB)
    assert max(len(r.raw) for r in fake_openai.requests) < 35_000 * (KEEP_IMAGES + IMAGE_SLACK)
    record = json.dumps(session_to_record(session, "m"))
    assert sum(len(p.images) for m in session.messages for p in m.tool_results()) == 30
    assert len(record) < 40_000  # 30 figures referenced by hash, not embedded


# -- what the user sees -----------------------------------------------------------------------------
def test_renderings_draw_outputs_under_their_row(shell):
    from shiro_kernel.events import ToolEnd, ToolStart, TurnEnd, Usage

    out = run_python(shell, "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()")
    call = ToolCallPart("c1", "python", json.dumps({"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2])"}))
    result = ToolResultPart("c1", "python", out.text)
    result.displays = out.displays
    log = TurnLog()
    for event in (ToolStart(call), ToolEnd(call, result, 0.2), TurnEnd("answered", Usage(1, 1))):
        log.feed(event)
    assert '<img class="shiro-output" src="data:image/png;base64,' in to_html(log)
    assert "](data:image/png;base64," in to_markdown(log)
    assert "  [<Figure" in to_text(log)  # a text-only frontend gets one line per output
    tool = to_bundle_json(log)["entries"][0]
    assert tool["code"] == "import matplotlib.pyplot as plt\nplt.plot([1, 2])"  # line breaks kept
    assert len(tool["outputs"]) == 1
    kept, left = outputs.within_budget(tool["outputs"] * 3, 2 * len(json.dumps(tool["outputs"][0]["data"])))
    assert "left out" in kept[2]["data"]["text/plain"] and left >= 0


def test_the_cell_change_block_names_the_exception_of_a_cell_that_failed(tmp_path):
    path = tmp_path / "nb.ipynb"
    nb = new_notebook(cells=[new_code_cell("df['y']", execution_count=1)])
    nbformat.write(nb, path)
    before = fingerprint(path)
    nb.cells[0].execution_count = 2
    nb.cells[0].outputs = [new_output("error", ename="KeyError", evalue="'y'", traceback=["\x1b[31mKeyError\x1b[0m"])]
    nbformat.write(nb, path)
    text = block(before, fingerprint(path))
    assert "- ran cell 1 (execution count 2): df['y'] — it raised KeyError: 'y'" in text


def test_a_read_only_asset_folder_keeps_the_image_in_memory(tmp_path):
    from fsutil import read_only

    from shiro_kernel.store.assets import AssetStore

    folder = tmp_path / "assets"
    folder.mkdir()
    store = AssetStore(folder)
    with read_only(folder):
        ref = store.put(png_of(5, 5), "image/png")
    assert store.get(ref) is not None and not list(Path(folder).iterdir())
