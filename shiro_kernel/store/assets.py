"""Images the model sees, stored by content hash: ``SHIRO_HOME/sessions/assets/<sha256>.<ext>``.

A tool result carries :class:`~shiro_kernel.transcript.ImageRef` values (hash, type, size, a text
stand-in); the bytes live here, so a session record stays small however many figures it holds, the same
figure is stored once, and a resumed session still has its figures. Images are downscaled before they
are stored (long side at most ``Shiro.image_max_px``, 1,024 by default) — this is the copy the model gets;
the user's view keeps the original. A write that fails (a read-only or full home) keeps the image in
memory for this kernel instead; the turn goes on.

Pillow is imported on the first image, never at ``%load_ext``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..transcript import ImageRef
from . import files
from .paths import home

DEFAULT_MAX_PX = 1024
#: what the model accepts; anything else is converted to PNG
MODEL_MIMES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
_MEMORY_LIMIT = 64 * 1024 * 1024  # bytes kept in this process's cache


def _alpha_min(image: Any) -> float:
    """The smallest alpha value of an RGBA/LA image (its last band's extrema)."""
    band = image.getextrema()[-1]
    return float(band[0] if isinstance(band, tuple) else band)


def downscale(data: bytes, mime: str, max_px: int = DEFAULT_MAX_PX) -> tuple[bytes, str, int, int]:
    """``(data, mime, width, height)`` with the long side at most ``max_px`` (aspect kept). An image that
    already fits and has a type the model takes is returned as it is. Raises ValueError for bytes that
    are not an image Pillow can read."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"not a readable image ({exc})") from None
    if max(width, height) <= max_px and mime in MODEL_MIMES and getattr(image, "n_frames", 1) == 1:
        return data, mime, width, height
    scale = min(1.0, max_px / max(width, height))
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    image.seek(0)
    opaque = image.mode in ("RGB", "L") or (image.mode in ("RGBA", "LA") and _alpha_min(image) == 255)
    converted = image.convert("RGB" if opaque else "RGBA")
    if converted.size != size:  # bilinear with a reducing gap: close to Lanczos for charts, 4x faster
        converted = converted.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)
    out = io.BytesIO()
    if mime == "image/jpeg" and opaque:  # a photo stays a JPEG
        converted.save(out, format="JPEG", quality=85)
        return out.getvalue(), "image/jpeg", size[0], size[1]
    if opaque:  # a chart: 256 colours lose nothing visible and halve the bytes the model is sent
        converted = converted.quantize(colors=256)
    converted.save(out, format="PNG", compress_level=6)
    return out.getvalue(), "image/png", size[0], size[1]


class AssetStore:
    """Images by content hash under ``root``, with an in-process cache."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._cache: dict[str, bytes] = {}
        self._cached = 0
        self._urls: dict[str, str] = {}
        self._lock = threading.Lock()

    def path_for(self, sha256: str, mime: str) -> Path:
        if not (len(sha256) == 64 and all(c in "0123456789abcdef" for c in sha256)):
            raise ValueError(f"not an image hash: {sha256!r}")
        return self.root / f"{sha256}.{MODEL_MIMES.get(mime, 'png')}"

    def put(self, data: bytes, mime: str, *, max_px: int = DEFAULT_MAX_PX, alt: str = "") -> ImageRef:
        """Downscale, store and return the reference. Raises ValueError for bytes that are not an image."""
        small, small_mime, width, height = downscale(data, mime, max_px)
        sha = hashlib.sha256(small).hexdigest()
        self._remember(sha, small)
        path = self.path_for(sha, small_mime)
        if not path.exists():
            try:
                files.write_atomic(path, small)
            except StoreError:
                pass  # kept in memory for this kernel; the record still refers to it by hash
        return ImageRef(sha, small_mime, width, height, alt)

    def get(self, ref: ImageRef) -> bytes | None:
        """The stored bytes, or None when they are gone (a deleted folder, another machine)."""
        with self._lock:
            cached = self._cache.get(ref.sha256)
        if cached is not None:
            return cached
        try:
            data = self.path_for(ref.sha256, ref.mime).read_bytes()
        except (OSError, ValueError):
            return None
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            return None  # a damaged file is never sent
        self._remember(ref.sha256, data)
        return data

    def data_url(self, ref: ImageRef) -> str | None:
        """``data:<mime>;base64,…`` for the wire (built once per image per process), or None."""
        with self._lock:
            url = self._urls.get(ref.sha256)
        if url is not None:
            return url
        data = self.get(ref)
        if data is None:
            return None
        url = f"data:{ref.mime};base64,{base64.b64encode(data).decode('ascii')}"
        with self._lock:
            self._urls[ref.sha256] = url
            while len(self._urls) > 64:
                self._urls.pop(next(iter(self._urls)))
        return url

    def _remember(self, sha: str, data: bytes) -> None:
        with self._lock:
            if sha in self._cache:
                return
            while self._cache and self._cached + len(data) > _MEMORY_LIMIT:
                oldest = next(iter(self._cache))
                self._cached -= len(self._cache.pop(oldest))
            self._cache[sha] = data
            self._cached += len(data)


_stores: dict[Path, AssetStore] = {}
_stores_lock = threading.Lock()


def assets(root: Path | None = None) -> AssetStore:
    """The asset store of ``SHIRO_HOME`` (one per folder per process, so the cache is shared)."""
    folder = Path(root) if root is not None else home() / "sessions" / "assets"
    with _stores_lock:
        store = _stores.get(folder)
        if store is None:
            store = _stores[folder] = AssetStore(folder)
        return store


__all__ = ["DEFAULT_MAX_PX", "MODEL_MIMES", "AssetStore", "assets", "downscale"]
