"""Where ``/mcp serve``'s bearer token lives: ``SHIRO_HOME/mcp/serve-<pid>-<port>.env`` (0600, in a 0700
folder), never in a cell.

A cell's output is saved in the ``.ipynb`` (and widget state in its metadata) and read back to the model by
``notebook_read``; a private file is neither. The file is shell ``export`` lines to ``source`` (dotenv reads
them too), then the ready-to-paste commands with the token written out
(:meth:`~.server.McpKernelServer.token_file_text`).

Invariants:

* Deleted on ``/mcp stop``, on kernel shutdown (``Agent.close``) and, failing both, at interpreter exit; a
  file left by a kernel that was killed is deleted by the next ``/mcp serve`` (its pid is gone, and so is
  the server its token opened).
* Written atomically with its mode set before it is renamed into place: never readable by others, even
  for a moment.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StoreError
from ..store.files import write_atomic
from .consent import folder, private_folder

if TYPE_CHECKING:
    from .server import McpKernelServer

#: token files this process wrote and has not deleted yet: deleted at exit, should nothing else do it
_WRITTEN: set[Path] = set()


def write_token_file(server: McpKernelServer) -> Path:
    """Write the running ``server``'s token file; its path. Raises :class:`StoreError`."""
    assert server.info is not None, "the server is not running"
    port = server.info.url.rsplit(":", 1)[1].split("/")[0]
    try:
        where = private_folder()
    except OSError as exc:
        raise StoreError(f"could not make {folder()} ({exc.strerror or exc})") from exc
    _delete_dead(where)
    path = where / f"serve-{os.getpid()}-{port}.env"
    write_atomic(path, server.token_file_text(), mode=0o600)
    _WRITTEN.add(path)
    return path


def delete_token_file(path: Path) -> None:
    _WRITTEN.discard(path)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@atexit.register
def _delete_all() -> None:
    for path in list(_WRITTEN):
        with contextlib.suppress(OSError):
            delete_token_file(path)


def _delete_dead(where: Path) -> None:
    """Delete the token files of kernels that are gone (killed before they could): their tokens are dead."""
    for path in where.glob("serve-*.env"):
        try:
            pid = int(path.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                path.unlink()
        except OSError:  # alive, and someone else's
            pass


__all__ = ["delete_token_file", "write_token_file"]
