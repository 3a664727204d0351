"""Figures both ways, in a real kernel run by nbclient (matplotlib's inline backend, as in a notebook):
the user sees what the agent's code displayed, the model sees the figure, and nothing leaks into the
user's next cell."""

from __future__ import annotations

import base64
import json

import pytest
from fakeopenai import NO_VISION_MESSAGE, Call, Reply
from kernelutil import NOTEBOOK_KEY as KEY
from kernelutil import run_notebook

PLOT = (
    "import matplotlib.pyplot as plt\n"
    "xs = list(range(10))\n"
    "plt.plot(xs, [x * x for x in xs])\n"
    "plt.title('x against its square')\n"
    "plt.xlabel('x'); plt.ylabel('x squared')\n"
    "plt.show()"
)
PNG = b"\x89PNG\r\n\x1a\n"


def _images_in(request) -> list[bytes]:
    """Every image a request carries (Responses function_call_output parts, Chat user image_url parts)."""
    found = []
    body = request.body
    for item in body.get("input") or []:
        output = item.get("output") if isinstance(item, dict) else None
        for part in output if isinstance(output, list) else []:
            if part.get("type") == "input_image":
                found.append(part["image_url"])
    for m in body.get("messages") or []:
        content = m.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                assert m["role"] == "user"
                found.append(part["image_url"]["url"])
    return [base64.b64decode(url.split(",", 1)[1]) for url in found]


def _env(fake, api: str) -> dict[str, str]:
    return {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.base_url, "SHIRO_API": api, "SHIRO_MODEL": "gpt-4o-mini"}


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_plot_reaches_the_cell_and_the_model_and_not_the_next_cell(fake_openai, tmp_path, api):
    fake_openai.enqueue(
        Reply(text="Plotting it.", tool_calls=[Call("python", {"code": PLOT})]),
        Reply(text="The curve is a parabola."),
    )
    nb = run_notebook(
        tmp_path / "plots.ipynb",
        [
            "%matplotlib inline\n%load_ext shiro_kernel",
            '%config Shiro.approval = "auto"',
            "%shiro --wait plot x against its square",
            "1 + 1",
        ],
        _env(fake_openai, api),
    )
    # the model: the second request carries the figure as an image, in the API's own shape
    assert len(fake_openai.requests) == 2
    images = _images_in(fake_openai.requests[1])
    assert len(images) == 1 and images[0].startswith(PNG)
    tool_text = json.dumps(fake_openai.requests[1].body)
    assert "x against its square" in tool_text  # the figure's text stand-in names it
    # the user: the turn's cell holds the figure in the static bundle and in the HTML
    turn_cell = nb.cells[2]
    final = [o for o in turn_cell.outputs if "application/vnd.shiro.turn+json" in o.get("data", {})][-1]
    bundle = final["data"]["application/vnd.shiro.turn+json"]
    tool = next(e for e in bundle["entries"] if e["type"] == "tool")
    assert tool["code"].startswith("import matplotlib.pyplot as plt")
    figures = [o for o in tool["outputs"] if "image/png" in o["data"]]
    assert len(figures) == 1 and base64.b64decode(figures[0]["data"]["image/png"]).startswith(PNG)
    assert '<img class="shiro-output" src="data:image/png;base64,' in final["data"]["text/html"]
    said, tool_row, answer, _footer = final["data"]["text/plain"].split("\n\n")
    assert (said, answer) == ("Plotting it.", "The curve is a parabola.")
    assert tool_row.splitlines()[1:] == ["  [<Figure size 640x480 with 1 Axes>]"]  # the figure's text stand-in
    # nothing leaked: no stray figure in the turn's own cell outside the bundle, nor in the next cell
    stray = [
        o
        for c in nb.cells[2:]
        for o in c.outputs
        if "image/png" in o.get("data", {}) and "application/vnd.shiro.turn+json" not in o.get("data", {})
    ]
    assert stray == []
    assert [o["data"]["text/plain"] for o in nb.cells[3].outputs] == ["2"]


def test_a_model_without_vision_gets_one_retry_with_a_text_description(fake_openai, tmp_path):
    fake_openai.no_vision_models = {"gpt-4o-mini"}
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": PLOT})]), Reply(text="A rising curve."))
    nb = run_notebook(
        tmp_path / "novision.ipynb",
        [
            "%matplotlib inline\n%load_ext shiro_kernel",
            '%config Shiro.approval = "auto"',
            "%shiro --wait plot x against its square",
        ],
        _env(fake_openai, "responses"),
    )
    statuses = [r.status for r in fake_openai.requests]
    assert statuses == [200, 400, 200]  # the step with the image is refused once, then re-sent without
    assert fake_openai.requests[1].body != fake_openai.requests[2].body
    assert _images_in(fake_openai.requests[2]) == []
    retry = json.dumps(fake_openai.requests[2].body)
    assert "this model takes no images" in retry and "x against its square" in retry
    text = json.dumps(nb.cells[2].outputs)
    final = [o for o in nb.cells[2].outputs if "application/vnd.shiro.turn+json" in o.get("data", {})][-1]
    _tool_row, notice, answer, _footer = final["data"]["text/plain"].split("\n\n")
    assert notice == (
        "[this model does not take images: the step was re-sent with text descriptions of the figures instead, "
        "and shiro will keep doing so for it (%config Shiro.vision = True sends images again)]"
    )
    assert answer == "A rising curve."
    assert NO_VISION_MESSAGE not in text  # the refusal was handled, not shown as the turn's error
