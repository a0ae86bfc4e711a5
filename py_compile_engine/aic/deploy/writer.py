"""Writing a result tree atomically: everything goes into a temporary folder next to the
destination and is renamed into place at the end, so a failure leaves no half-written tree.
YAML is dumped by PyYAML (block style, multi-line strings as literal blocks, no anchors), JSON
by the json module, CSV by the csv module."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import stat
import tempfile

import yaml

from .errors import DeployError
from .pick_files import FileContent


#: libyaml's emitter when PyYAML has it (the pure-Python emitter was most of a tree's write time).
_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):
    """Block-style YAML without anchors; multi-line strings as literal blocks."""

    def ignore_aliases(self, data):  # noqa: D102 - PyYAML hook
        return True


def _str_representer(dumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(data) -> str:
    """One YAML document."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     width=100000, allow_unicode=True)


def dump_yaml_docs(docs) -> str:
    """Several YAML documents separated by ``---``."""
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         width=100000, allow_unicode=True)


def csv_cell(value) -> str:
    """A CSV cell as the reference writes it (spec 60 §3.1): integers bare, floats in shortest
    round-trip form, missing values (None / NaN) empty, booleans ``True``/``False``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return "" if value != value else repr(value)
    return str(value)


def dump_csv(columns: list[str], rows: list[dict]) -> str:
    """Header and rows, comma-separated, ``\\n`` line ends."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell(row.get(c)) for c in columns])
    return buf.getvalue()


def render(content: FileContent) -> str:
    """The text of one file."""
    if content.kind == "yaml":
        return dump_yaml(content.data)
    if content.kind == "yaml_docs":
        return dump_yaml_docs(content.data)
    if content.kind == "json":
        return json.dumps(content.data, indent=2, allow_nan=False) + "\n"
    if content.kind in ("text", "svg"):
        return content.data
    raise ValueError(f"unknown file kind {content.kind!r}")


def check_save_dir(path) -> str:
    """``--save-dir DIR``: a folder (created if missing, with its parents) that can be written;
    a file in its place or no write permission is a :class:`DeployError`."""
    text = os.fspath(path)
    if os.path.exists(text) and not os.path.isdir(text):
        raise DeployError(f"--save-dir {text!r} is a file, not a folder; give a folder path")
    parent = text
    while not os.path.exists(parent):
        up = os.path.dirname(os.path.abspath(parent))
        if up == os.path.abspath(parent):
            break
        parent = up
    if not os.path.isdir(parent):
        raise DeployError(f"--save-dir {text!r}: {parent!r} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DeployError(f"--save-dir {text!r}: the folder {parent!r} is not writable")
    return text


def write_tree(save_dir: str, relative: str, files: dict[str, FileContent]) -> str:
    """Writes ``files`` (``{"a/b/c.yaml": content}``) under ``save_dir/relative`` through a
    temporary folder in ``save_dir`` renamed into place at the end; returns the final path.
    An existing destination is never overwritten."""
    check_save_dir(save_dir)
    try:
        return _write_tree(save_dir, relative, files)
    except OSError as exc:
        raise DeployError(f"--save-dir {save_dir!r}: cannot write "
                          f"{exc.filename or save_dir!r}: {exc.strerror or exc}") from None


def _write_tree(save_dir: str, relative: str, files: dict[str, FileContent]) -> str:
    os.makedirs(save_dir, exist_ok=True)
    final = os.path.join(save_dir, relative)
    if os.path.exists(final):
        raise DeployError(f"--save-dir: {final!r} exists already; choose another folder")
    parent = os.path.dirname(final) or save_dir
    created = [] if os.path.isdir(parent) else [parent]
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".aic-deploy-", dir=parent)
    os.chmod(tmp, 0o755)
    try:
        for name, content in files.items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(render(content))
            if content.executable:
                mode = os.stat(path).st_mode
                os.chmod(path, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in created:
            try:
                os.removedirs(folder)
            except OSError:
                pass
        raise
    return final
