"""Installed cache wheels: read-only cache layers found with no configuration.

A cache wheel (``abicache export --wheel NAME==VERSION``) registers its
package in the ``abicache.caches`` entry-point group; the package's ``cache/``
directory is a cache root that abicache reads and never writes. Discovery
reads only metadata: each ``*.dist-info/entry_points.txt`` directly under the
entries of ``sys.path`` that are site directories (the interpreter's
site-packages and the user site), once per process and ``sys.path`` (it runs
only when the warm path misses, never on a warm hit). Never the current
directory or a script's directory (``''`` or ``sys.path[0]``), and no other
``sys.path`` entry: a project directory holding a ``.dist-info`` and a cache
is not an installed wheel. Uninstalling the wheel removes its files, and with
them the layer.
"""

import configparser
import os
import sys
from typing import Dict, List, Set, Tuple

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


def site_dirs() -> Set[str]:
    """The real paths of this interpreter's site directories: its
    site-packages (``site.getsitepackages()``, a venv's own when in one) and
    the user site when it is enabled. Only these are searched for cache wheels."""
    import site

    dirs: List[str] = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # an old virtualenv's own site.py
        pass
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return {os.path.realpath(d) for d in dirs}


def _discover(paths: Tuple[str, ...]) -> List[str]:
    roots: List[str] = []
    sites = site_dirs()
    for base in paths:
        # `''` is the current directory (`python -c`, `-m`, stdin) and the
        # first entry a script's directory: neither is a site directory.
        if not base or os.path.realpath(base) not in sites:
            continue
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
