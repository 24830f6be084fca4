"""Run the command line in-process from a folder, capturing what it prints."""

from __future__ import annotations

from pathlib import Path

from losscc import cli


def run(monkeypatch, capsys, cwd: Path, *args) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    capsys.readouterr()
    rc = cli.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err
