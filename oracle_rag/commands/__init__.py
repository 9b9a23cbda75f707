"""CLI command groups beyond the core ones in cli.py, one module per area.

Each module defines click commands and attaches them to ``cli.main`` in a
``register(main)`` function, so areas can grow without editing cli.py.
"""

from __future__ import annotations

import importlib

import click

AREAS = ("web", "oracle", "sources", "aggregate", "writepath", "integrations")


def register_all(main: click.Group) -> None:
    for area in AREAS:
        module = importlib.import_module(f"{__name__}.{area}")
        register = getattr(module, "register", None)
        if register is not None:
            register(main)
