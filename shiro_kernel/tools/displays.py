"""What the ``python`` tool's code displays: captured for the user's view of the turn and, as images, for
the model — never left behind in the notebook.

* :class:`Capture` is the display publisher while the code runs: every ``display(...)`` (a figure by the
  inline backend's ``plt.show()``, a DataFrame, Plotly or Vega-Lite JSON, Markdown, an image) is kept as a
  MIME bundle for the view (capped: :data:`BUNDLE_BYTES`, :data:`CALL_BYTES`, with a visible note for
  what is left out), its ``text/plain`` goes into the text the model reads, and its PNG/JPEG into the
  images the model sees (at most :data:`MODEL_IMAGES` per call).
* :class:`spy_on_formatter` wraps the shell's display formatter for the duration, so a displayed matplotlib
  figure is known as such: its text stand-in (title, axes, series, ranges) goes with its image.
* :func:`collect_figures` renders the figures the code created but never showed, then closes every
  figure the code created: the inline backend flushes open figures at the end of each cell, so a figure
  left open would reappear in the user's next cell.

matplotlib is never imported here: only used when the user's code already imported ``pyplot``.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

from IPython.core.displaypub import DisplayPublisher

from ..text import HeadTail, cut
from .base import Image

#: MIME types kept for the user's view (others are dropped: widget views need a live kernel)
DISPLAY_MIMES = (
    "text/plain",
    "text/html",
    "text/markdown",
    "text/latex",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/svg+xml",
    "application/json",
    "application/vnd.plotly.v1+json",
    "application/vnd.vegalite.v5+json",
    "application/vnd.vegalite.v4+json",
    "application/vnd.vega.v5+json",
)
MODEL_IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif")
#: one display bundle at most (the rest of it is replaced by a note)
BUNDLE_BYTES = 5_000_000
#: everything one call displays, at most
CALL_BYTES = 12_000_000
#: images of one call that reach the model
MODEL_IMAGES = 6


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, default=str))


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


class Capture:
    """The displays of one call: ``bundles`` (``{"data", "metadata"}``) for the view, ``images`` for the
    model, ``notes`` saying what the caps left out. Text for the model is written to ``log``."""

    def __init__(self, log: HeadTail[str]) -> None:
        self.log = log
        self.bundles: list[dict[str, Any]] = []
        self.images: list[Image] = []
        self.notes: list[str] = []
        self.shown_figures: set[int] = set()  # id() of figures already displayed with an image
        self._bytes = 0
        self._current: Any = None  # the object being formatted (FormatterSpy), for its text stand-in

    def add(self, data: dict[str, Any], metadata: dict[str, Any] | None = None, obj: Any = None) -> None:
        """Keep one display bundle."""
        obj = obj if obj is not None else self._current
        kept = {k: v for k, v in data.items() if k in DISPLAY_MIMES}
        alt = figure_alt(obj) if _is_figure(obj) else ""
        if _is_figure(obj) and any(k.startswith("image/") for k in kept):
            self.shown_figures.add(id(obj))
        for mime in list(kept):
            size = _size(kept[mime])
            if mime != "text/plain" and (size > BUNDLE_BYTES or self._bytes + size > CALL_BYTES):
                limit = BUNDLE_BYTES if size > BUNDLE_BYTES else CALL_BYTES
                self.notes.append(
                    f"[a {_mb(size)} {mime} output was left out of this turn's view: over the {_mb(limit)} cap]"
                )
                del kept[mime]
                continue
            self._bytes += size
        self._model_text(kept, alt)
        for mime in MODEL_IMAGE_MIMES:
            if mime in kept and isinstance(kept[mime], str):
                self._model_image(kept[mime], mime, alt)
                break
        if any(k != "text/plain" for k in kept):
            self.bundles.append({"data": kept, "metadata": dict(metadata or {})})

    def _model_text(self, kept: dict[str, Any], alt: str) -> None:
        plain = kept.get("text/plain")
        if isinstance(plain, list):
            plain = "".join(plain)
        if alt:
            text = f"[figure: {alt}]"
        elif isinstance(plain, str) and plain:
            text = cut(plain, 10_000)
        else:
            text = " ".join(f"<{mime}>" for mime in kept)
        if text:
            self.log.write(text if text.endswith("\n") else text + "\n")

    def _model_image(self, b64: str, mime: str, alt: str) -> None:
        if len(self.images) >= MODEL_IMAGES:
            self.notes.append(f"[more than {MODEL_IMAGES} images: the rest were shown to the user but not sent to you]")
            return
        try:
            raw = base64.b64decode(b64, validate=False)
        except ValueError:
            return
        self.images.append(Image(raw, mime, alt=alt or f"image {len(self.images) + 1} of this call"))

    def note_text(self) -> str:
        return "\n".join(dict.fromkeys(self.notes))


class spy_on_formatter:
    """While active, ``shell.display_formatter.format`` remembers the object being formatted (so
    :class:`Capture` knows a figure when it sees one). The formatter is a trait of the shell and cannot be
    replaced by another type, so its ``format`` is shadowed on the instance and restored afterwards."""

    def __init__(self, shell: Any, capture: Capture) -> None:
        self.formatter = getattr(shell, "display_formatter", None)
        self.capture = capture

    def __enter__(self) -> spy_on_formatter:
        formatter, capture = self.formatter, self.capture
        if formatter is not None:
            real = formatter.format

            def format(obj: Any, include: Any = None, exclude: Any = None) -> Any:
                capture._current = obj
                return real(obj, include=include, exclude=exclude)

            formatter.format = format
        return self

    def __exit__(self, *exc: object) -> None:
        if self.formatter is not None:
            try:
                del self.formatter.format
            except AttributeError:
                pass


class Publisher(DisplayPublisher):
    """``shell.display_pub`` while the code runs (the trait wants a DisplayPublisher): hands every bundle
    to the capture instead of the notebook."""

    def __init__(self, capture: Capture, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self._capture = capture

    def publish(
        self,
        data: Any,
        metadata: Any = None,
        source: Any = None,
        *,
        transient: Any = None,
        update: bool = False,
        **kwargs: Any,
    ) -> None:
        self._capture.add(data if isinstance(data, dict) else {}, metadata if isinstance(metadata, dict) else None)
        self._capture._current = None

    def clear_output(self, wait: bool = False) -> None:
        pass  # the capture keeps everything; clearing would hide what the model needs to see


# -- matplotlib ----------------------------------------------------------------------------------------
def _is_figure(obj: Any) -> bool:
    figure = sys.modules.get("matplotlib.figure")
    return figure is not None and obj is not None and isinstance(obj, figure.Figure)


def open_figures() -> set[int]:
    """The numbers of the figures pyplot holds now (empty when pyplot was never imported)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    return set(pyplot.get_fignums()) if pyplot is not None else set()


def figure_png(fig: Any) -> bytes:
    from IPython.core.pylabtools import print_figure

    data = print_figure(fig, "png", bbox_inches="tight")
    return data if isinstance(data, bytes) else bytes(data or b"")


def collect_figures(capture: Capture, before: set[int]) -> None:
    """Show (render once) the figures the code created and did not display, then close every figure the
    code created, so none reappears in the user's next cell."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    from matplotlib._pylab_helpers import Gcf

    for num in sorted(set(pyplot.get_fignums()) - before):
        manager = Gcf.get_fig_manager(num)
        if manager is None:
            continue
        fig = manager.canvas.figure
        if id(fig) not in capture.shown_figures:
            try:
                png = figure_png(fig)
            except Exception as exc:  # a figure that cannot be drawn is reported, not raised
                capture.log.write(f"[figure {num} could not be drawn: {type(exc).__name__}: {exc}]\n")
            else:
                capture.add({"text/plain": f"<Figure {num}>", "image/png": base64.b64encode(png).decode()}, {}, obj=fig)
        pyplot.close(fig)
    inline = sys.modules.get("matplotlib_inline.backend_inline")
    to_draw = getattr(getattr(inline, "show", None), "_to_draw", None)
    if isinstance(to_draw, list):  # the backend's own list of figures to flush at the end of the cell
        to_draw[:] = [f for f in to_draw if f.number in before]


def figure_alt(fig: Any) -> str:
    """A matplotlib figure in words, for a model that takes no images: size, title, and per axes its
    title, axis labels, number of series and axis ranges."""
    try:
        width, height = (round(v) for v in fig.get_size_inches() * fig.dpi)
        bits = [f"matplotlib figure {width}×{height}"]
        suptitle = getattr(fig, "_suptitle", None)
        if suptitle is not None and suptitle.get_text():
            bits.append(f"title {suptitle.get_text()!r}")
        for i, ax in enumerate(fig.get_axes(), 1):
            series = len(ax.get_lines()) + len(ax.collections) + len(ax.containers)
            if not series and ax.patches:
                series = len(ax.patches)
            parts = [f"axes {i}"]
            if ax.get_title():
                parts.append(f"title {ax.get_title()!r}")
            x0, x1 = ax.get_xlim()
            y0, y1 = ax.get_ylim()
            parts.append(
                f"x {ax.get_xlabel()!r} from {x0:.4g} to {x1:.4g}"
                if ax.get_xlabel()
                else f"x from {x0:.4g} to {x1:.4g}"
            )
            parts.append(
                f"y {ax.get_ylabel()!r} from {y0:.4g} to {y1:.4g}"
                if ax.get_ylabel()
                else f"y from {y0:.4g} to {y1:.4g}"
            )
            parts.append(f"{series} series")
            bits.append(", ".join(parts))
        return "; ".join(bits)
    except Exception:  # an odd figure: say what it is, nothing more
        return "a matplotlib figure"


__all__ = ["Capture", "Publisher", "collect_figures", "figure_alt", "open_figures", "spy_on_formatter"]
