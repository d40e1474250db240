//! `load_inline`'s one native step: storing the generated sources in the
//! cache by content (`abicache::store::Store::store_generated_sources`).

use std::path::PathBuf;

use abicache::store::GeneratedFile;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::open_store;

/// Stores `files` (`(file name, text)` pairs) under `v1/sources/<digest>/`
/// of the cache and returns that directory. Intact files already there are
/// not written again.
#[pyfunction]
#[pyo3(signature = (files, cache_dir=None))]
pub fn store_generated_sources(
    py: Python<'_>,
    files: Vec<(String, String)>,
    cache_dir: Option<PathBuf>,
) -> PyResult<String> {
    let dir = py.detach(|| {
        let generated: Vec<GeneratedFile<'_>> = files
            .iter()
            .map(|(name, text)| GeneratedFile {
                name,
                contents: text.as_bytes(),
            })
            .collect();
        let store = open_store(cache_dir)?;
        Ok::<_, abicache::Error>(store.store_generated_sources(&generated)?)
    });
    Ok(dir.map_err(|e| to_py(py, e))?.display().to_string())
}
