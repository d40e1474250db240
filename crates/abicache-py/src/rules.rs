//! Rules the Python package asks Rust for instead of restating them.

use pyo3::prelude::*;

use crate::convert::spec_from_json;

/// `TORCH_CUDA_ARCH_LIST` when set, else the compute capabilities of the
/// GPUs `nvidia-smi` lists (`"8.6 9.0"`, asked once per process), else
/// `None`: what a CUDA extension without `cuda_archs` is built for.
#[pyfunction]
pub fn visible_cuda_archs(py: Python<'_>) -> Option<String> {
    py.detach(abicache::default_cuda_archs)
}

/// Whether the spec (JSON, as `prepare` takes it) is a CUDA extension: its
/// `requires_cuda`, else whether any source is a CUDA source (`.cu`).
#[pyfunction]
pub fn requires_cuda(spec: &str) -> PyResult<bool> {
    Ok(spec_from_json(spec)?.requires_cuda())
}

/// The warm-load record's format, from its one definition
/// (`abicache::warm_load`): `format`, `fields` (the JSON keys), `rows`
/// (row kind to field names, in position order), `hit_variables`,
/// `cuda_hit_variables` and `gpu_listing`. The reader in `_warm_record.py`
/// carries a generated copy (checked current by a Rust test); the Python
/// tests compare it with this.
#[pyfunction]
pub fn warm_record_format(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    use abicache::warm_load as w;
    let rows: serde_json::Map<String, serde_json::Value> = w::WARM_RECORD_ROWS
        .iter()
        .map(|(kind, fields)| ((*kind).to_owned(), serde_json::json!(fields)))
        .collect();
    let value = serde_json::json!({
        "format": w::WARM_RECORD_FORMAT,
        "fields": w::WARM_RECORD_FIELDS,
        "rows": rows,
        "hit_variables": w::HIT_VARIABLES,
        "cuda_hit_variables": w::CUDA_HIT_VARIABLES,
        "gpu_listing": w::GPU_LISTING,
    });
    crate::convert::json_to_python(py, &value)
}

/// The fingerprint root of a spec (JSON, as `prepare` takes it) that names
/// none: the common directory of its sources' directories and include
/// paths (`ExtensionSpec::default_fingerprint_root`), else the current
/// directory.
#[pyfunction]
pub fn fingerprint_root(spec: &str) -> PyResult<String> {
    match spec_from_json(spec)?.default_fingerprint_root() {
        Some(root) => Ok(root.display().to_string()),
        None => std::env::current_dir()
            .map(|d| d.display().to_string())
            .map_err(|e| {
                pyo3::exceptions::PyOSError::new_err(format!(
                    "cannot read the current directory ({e}); pass `fingerprint_root`"
                ))
            }),
    }
}

/// Whether `ABICACHE_REBUILD` asks for a rebuild: `True` for `1`, `False`
/// when unset or blank; any other value raises `abicache.Error` naming it.
#[pyfunction]
pub fn rebuild_requested(py: Python<'_>) -> PyResult<bool> {
    abicache::env_vars::rebuild_requested().map_err(|e| crate::errors::to_py(py, e))
}

/// `ABICACHE_INTERCEPT`'s rule (`abicache_env_vars::parse_intercept`) for
/// `value` (`None`: unset): `"off"`, `"on"` or `"verbose"`; any other value
/// raises `abicache.Error` with the warning the start-up hook prints
/// (`intercept_refusal`). The hook restates the rule (it cannot import this
/// module) at `python/_abicache_intercept.py:mode`; tied by
/// `tests/python/test_intercept_and_owner_rules.py::test_abicache_intercept_is_parsed_by_one_rule`,
/// which compares the two value for value.
#[pyfunction]
#[pyo3(signature = (value))]
pub fn intercept_mode(value: Option<&str>) -> PyResult<&'static str> {
    use abicache::env_vars::{intercept_refusal, parse_intercept, Intercept};
    match parse_intercept(value) {
        Some(Intercept::Off) => Ok("off"),
        Some(Intercept::On) => Ok("on"),
        Some(Intercept::Verbose) => Ok("verbose"),
        None => Err(crate::errors::Error::new_err(intercept_refusal(
            value.unwrap_or_default(),
        ))),
    }
}

/// Whether the owner of `path` (not followed if a symlink) is one whose
/// library abicache loads (`abicache_store::trusted_owner`): this process's
/// effective uid, or root when `layer` (a read-only layer's library). The
/// Python loaders restate it (`python/abicache/_warm_record.py:trusted_owner`);
/// tied by `tests/python/test_intercept_and_owner_rules.py::test_the_library_owner_rule_is_rusts`,
/// which compares the two value for value on real files.
#[pyfunction]
pub fn library_owner_trusted(path: std::path::PathBuf, layer: bool) -> PyResult<bool> {
    use std::os::unix::fs::MetadataExt;
    // The effective uid as the store reads it (`/proc/self`'s owner).
    let uid = std::fs::metadata("/proc/self")?.uid();
    let owner = std::fs::symlink_metadata(&path)
        .map_err(|e| {
            pyo3::exceptions::PyOSError::new_err(format!(
                "cannot inspect `{}`: {e}",
                path.display()
            ))
        })?
        .uid();
    Ok(abicache::store::trusted_owner(owner, uid, layer))
}

/// This process's offline mode (`--offline` has no say here:
/// `ABICACHE_OFFLINE`, else `offline` in the config file): `"0"`, `"1"` or
/// `"warn"`. Interception asks it before it lets torch's own function
/// build (`python/_abicache_intercept.py`); a setting that cannot be used
/// raises `abicache.Error` naming it.
#[pyfunction]
pub fn offline_mode(py: Python<'_>) -> PyResult<&'static str> {
    let settings = crate::settings(None).map_err(|e| crate::errors::to_py(py, e))?;
    Ok(settings.misses.offline.as_str())
}
