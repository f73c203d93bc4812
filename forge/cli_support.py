"""What every forge command shares: JSON or rendered output, errors as one clear line, and the
store folder a command reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from forge.errors import ForgeError


def emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        render(data)


def guarded(fn: Callable[[], None]) -> None:
    """Run a command; what goes wrong ends in one line and an exit code, not a traceback:
    forge's own errors with theirs, the machine's (files, permissions, disk) with 1."""
    try:
        fn()
    except ForgeError as exc:
        click.echo(f"forge: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("forge: interrupted; run the same command again to resume", err=True)
        sys.exit(130)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"forge: error: {exc.strerror or exc}{where}", err=True)
        sys.exit(1)
    except Exception as exc:
        import duckdb

        if not isinstance(exc, duckdb.Error):
            raise
        # A store opens lazily: damage in a page shows on the first query that reads it.
        from forge.database import damaged_store

        click.echo(f"forge: error: {damaged_store(None, exc)}", err=True)
        sys.exit(1)
    except MemoryError:
        click.echo("forge: error: out of memory", err=True)
        sys.exit(1)


def store_for(store: str | None, intent: str | None) -> Path:
    if store:
        return Path(store)
    if intent:
        from forge.build import default_store_dir

        return default_store_dir(Path(intent))
    return Path(".forge")
