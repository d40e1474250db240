"""Type stubs of ``abicache._native`` (the PyO3 bindings). Checked against the
module by ``tests/python/test_api.py::test_stubs_match_the_native_module``
(``mypy.stubtest``) and by ``scripts/test.sh``."""

from os import PathLike
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

_Path = Union[str, PathLike[str]]

__all__ = [
    "Error",
    "BuildError",
    "AbiError",
    "LockTimeout",
    "CacheMiss",
    "torch_stable_abi_target_define",
    "default_cache_dir",
    "cli_main",
    "stats",
    "prepare",
    "key",
    "build",
    "explain",
    "check_isa",
    "store_generated_sources",
    "prebuild",
    "record_plan_entry",
    "visible_cuda_archs",
    "requires_cuda",
    "warm_record_format",
    "fingerprint_root",
    "rebuild_requested",
    "intercept_mode",
    "offline_mode",
    "library_owner_trusted",
]

class Error(RuntimeError): ...

class BuildError(Error):
    output: Optional[str]
    command: Optional[str]

class AbiError(Error): ...
class LockTimeout(Error): ...

class CacheMiss(Error):
    extension: Optional[str]
    key: Optional[str]
    closest_key: Optional[str]
    differs: Sequence[str]
    command: Optional[str]

def torch_stable_abi_target_define(major: int, minor: int) -> str: ...
def default_cache_dir() -> str: ...
def cli_main(argv: Sequence[_Path], package_dir: Optional[_Path] = None) -> int: ...
def stats(cache_dir: Optional[_Path] = None) -> Dict[str, Any]: ...
def prepare(spec: str, env: str, root: _Path, cache_dir: Optional[_Path] = None) -> Dict[str, Any]: ...
def key(spec: str, env: str, root: _Path, cache_dir: Optional[_Path] = None) -> str: ...
def build(
    spec: str,
    env: str,
    root: _Path,
    cache_dir: Optional[_Path] = None,
    *,
    rebuild: bool = False,
    site_packages: Sequence[_Path] = ...,
    progress: Optional[Callable[[Dict[str, Any]], None]] = None,
    quiet: bool = False,
    warm_record: Optional[str] = None,
    warm_files: Sequence[_Path] = ...,
    layers: Sequence[_Path] = ...,
) -> Dict[str, Any]: ...
def explain(
    spec: str, env: str, root: _Path, cache_dir: Optional[_Path] = None
) -> Tuple[str, Dict[str, Any]]: ...
def check_isa(isa: str, what: str = "the library") -> None: ...
def store_generated_sources(files: Sequence[Tuple[str, str]], cache_dir: Optional[_Path] = None) -> str: ...

def prebuild(
    specs: Sequence[_Path],
    pythons: Sequence[_Path] = ...,
    envs: Sequence[_Path] = ...,
    extensions: Sequence[str] = ...,
    cache_dir: Optional[_Path] = None,
    *,
    jobs: Optional[int] = None,
    quiet: bool = True,
    matrix: Optional[str] = None,
    uv: Optional[_Path] = None,
    keep_envs: Optional[_Path] = None,
    plans: Sequence[_Path] = ...,
) -> Dict[str, Any]: ...
def record_plan_entry(plan: _Path, spec: str, env: str, root: _Path, cache_dir: Optional[_Path] = None) -> bool: ...
def visible_cuda_archs() -> Optional[str]: ...
def requires_cuda(spec: str) -> bool: ...
def warm_record_format() -> Dict[str, Any]: ...
def fingerprint_root(spec: str) -> str: ...
def rebuild_requested() -> bool: ...
def intercept_mode(value: Optional[str]) -> str: ...
def offline_mode() -> str: ...
def library_owner_trusted(path: _Path, layer: bool) -> bool: ...
