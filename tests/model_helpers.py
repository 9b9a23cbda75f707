"""A data directory that holds the session's model file, as every indexing test needs one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def link_model(model: Path, data_dir: Path) -> Path:
    """``data_dir/models/<model>``: a hard link to the session's model (a copy across file systems).

    Returns ``data_dir``. Linking costs nothing and shares the page cache; the
    model is read-only for the tests, so one file serves them all.
    """
    target = data_dir / "models" / model.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        try:
            os.link(model, target)
        except OSError:
            shutil.copyfile(model, target)
    return data_dir
