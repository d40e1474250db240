//! Type conversions between Python and the façade: JSON text in, Python
//! objects (dicts, lists, str, int, float, bool, None) out.

use abicache::key::{Environment, ExtensionSpec};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;

/// Parses the spec JSON built by `abicache` (the fields of `ExtensionSpec`).
pub fn spec_from_json(text: &str) -> PyResult<ExtensionSpec> {
    serde_json::from_str(text)
        .map_err(|e| PyValueError::new_err(format!("invalid extension spec JSON: {e}")))
}

/// Parses the environment JSON built by `abicache` (the fields of `Environment`).
pub fn env_from_json(text: &str) -> PyResult<Environment> {
    serde_json::from_str(text)
        .map_err(|e| PyValueError::new_err(format!("invalid environment JSON: {e}")))
}

/// Serialises `value` and converts it to Python objects.
pub fn to_python<'py>(
    py: Python<'py>,
    value: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(value)
        .map_err(|e| PyValueError::new_err(format!("cannot convert to Python: {e}")))?;
    json_to_python(py, &json)
}

/// Converts a JSON value to the Python object `json.loads` would return.
pub fn json_to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_python(py, v)?)?;
            }
            dict.into_any()
        }
    })
}
