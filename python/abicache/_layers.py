"""Installed cache wheels: read-only cache layers found with no configuration.

A cache wheel (``abicache export --wheel NAME==VERSION``) registers its
package in the ``abicache.caches`` entry-point group; the package's ``cache/``
directory is a cache root that abicache reads and never writes. Discovery
reads only metadata: each ``*.dist-info/entry_points.txt`` directly under the
entries of ``sys.path``, once per process and ``sys.path`` (it runs only when
the warm path misses, never on a warm hit). Uninstalling the wheel removes
its files, and with them the layer.
"""

import configparser
import os
import sys
from typing import Dict, List, Tuple

#: The entry-point group cache wheels register under.
GROUP = "abicache.caches"

_found: Dict[Tuple[str, ...], List[str]] = {}


def wheel_layers() -> List[str]:
    """The cache roots of the installed cache wheels, in ``sys.path`` order
    (duplicates dropped), remembered for this process and ``sys.path``."""
    key = tuple(sys.path)
    if key not in _found:
        _found[key] = _discover(key)
    return list(_found[key])


def _discover(paths: Tuple[str, ...]) -> List[str]:
    roots: List[str] = []
    for entry in paths:
        base = entry or os.getcwd()
        try:
            names = sorted(n for n in os.listdir(base) if n.endswith(".dist-info"))
        except OSError:
            continue
        for name in names:
            for module in _modules(os.path.join(base, name, "entry_points.txt")):
                root = os.path.join(base, *module.split("."), "cache")
                if os.path.isdir(root) and root not in roots:
                    roots.append(root)
    return roots


def _modules(path: str) -> List[str]:
    """The modules ``path`` (an ``entry_points.txt``) names in :data:`GROUP`."""
    if not os.path.isfile(path):
        return []
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return []
    if not parser.has_section(GROUP):
        return []
    modules = []
    for value in parser[GROUP].values():
        module = value.split(":", 1)[0].strip()
        if module and all(part.isidentifier() for part in module.split(".")):
            modules.append(module)
    return modules
