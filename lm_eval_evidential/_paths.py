"""Where the shipped task YAMLs live: inside the wheel, or at the top of a source checkout."""

from pathlib import Path


def tasks_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "tasks", here.parent / "tasks"):
        if (candidate / "_edl_base.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        f"lm-eval-evidential task YAMLs not found next to {here}; reinstall the package (pip install .)"
    )
