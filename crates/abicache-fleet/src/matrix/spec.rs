//! The `--matrix` string: `python=3.10,3.12 torch=2.12,2.15`, and which of
//! its cells an existing environment already covers.

use std::fmt;
use std::str::FromStr;

use super::MatrixError;

/// An example users can copy, quoted in every parse error.
const EXAMPLE: &str = "python=3.10,3.12 torch=2.12,2.15";

/// A fleet's matrix: every Python release × every torch release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    /// Python releases (`3.12` or `3.12.1`), in the order given, without repeats.
    pub pythons: Vec<String>,
    /// torch releases (`2.15` or `2.15.0`), in the order given, without repeats.
    pub torches: Vec<String>,
}

/// One cell of a [`Matrix`]: a Python release and a torch release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixCell {
    /// The Python release as given (`3.12`).
    pub python: String,
    /// The torch release as given (`2.15`).
    pub torch: String,
}

impl MatrixCell {
    /// The environment's directory name: `py3.12-torch2.15`.
    pub fn dir_name(&self) -> String {
        format!("py{}-torch{}", self.python, self.torch)
    }

    /// The requirement that installs its torch: `torch==2.15.*` for a
    /// release given as `major.minor`, `torch==2.15.1` for a full one.
    pub fn torch_requirement(&self) -> String {
        if self.torch.split('.').count() == 2 {
            format!("torch=={}.*", self.torch)
        } else {
            format!("torch=={}", self.torch)
        }
    }

    /// True when an environment with these Python and torch versions
    /// (`3.12.1`, `2.15.0+cu132`) is this cell: each given component matches.
    pub fn is_covered_by(&self, python_version: &str, torch_version: &str) -> bool {
        release_matches(&self.python, python_version) && release_matches(&self.torch, torch_version)
    }
}

impl fmt::Display for MatrixCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "python={} torch={}", self.python, self.torch)
    }
}

/// `wanted` (`2.15`) names a prefix of the release components of `version`
/// (`2.15.0+cu132`: its local part is ignored).
pub(super) fn release_matches(wanted: &str, version: &str) -> bool {
    let public = version.split('+').next().unwrap_or_default();
    let mut have = public.split('.');
    wanted.split('.').all(|w| have.next() == Some(w))
}

impl Matrix {
    /// Every cell, Python-major, in the order given.
    pub fn cells(&self) -> Vec<MatrixCell> {
        self.pythons
            .iter()
            .flat_map(|python| {
                self.torches.iter().map(|torch| MatrixCell {
                    python: python.clone(),
                    torch: torch.clone(),
                })
            })
            .collect()
    }
}

impl FromStr for Matrix {
    type Err = MatrixError;

    fn from_str(text: &str) -> Result<Matrix, MatrixError> {
        let bad = |reason: String| MatrixError::Parse {
            matrix: text.to_owned(),
            reason,
            example: EXAMPLE,
        };
        let (mut pythons, mut torches): (Option<Vec<String>>, Option<Vec<String>>) = (None, None);
        for token in text.split_whitespace() {
            let Some((axis, values)) = token.split_once('=') else {
                return Err(bad(format!("`{token}` is not `AXIS=VERSION,VERSION`")));
            };
            let (slot, components) = match axis {
                "python" => (&mut pythons, 2..=3),
                "torch" => (&mut torches, 2..=3),
                _ => {
                    return Err(bad(format!(
                        "unknown axis `{axis}` (the axes are `python` and `torch`)"
                    )))
                }
            };
            if slot.is_some() {
                return Err(bad(format!(
                    "the axis `{axis}` is given twice; list all its versions once, comma-separated"
                )));
            }
            let mut list: Vec<String> = Vec::new();
            for value in values.split(',') {
                let parts: Vec<&str> = value.split('.').collect();
                let numeric = parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
                if !numeric || !components.contains(&parts.len()) {
                    return Err(bad(format!(
                        "`{value}` in `{axis}=` is not a release like `{}`",
                        if axis == "python" { "3.12" } else { "2.15" }
                    )));
                }
                if !list.iter().any(|v| v == value) {
                    list.push(value.to_owned());
                }
            }
            *slot = Some(list);
        }
        match (pythons, torches) {
            (Some(pythons), Some(torches)) => Ok(Matrix { pythons, torches }),
            (None, _) => Err(bad("it has no `python=` axis".into())),
            (_, None) => Err(bad("it has no `torch=` axis".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_axes_in_order_without_repeats() {
        let m: Matrix = "python=3.10,3.12,3.10  torch=2.12,2.15.1".parse().unwrap();
        assert_eq!(m.pythons, ["3.10", "3.12"]);
        assert_eq!(m.torches, ["2.12", "2.15.1"]);
        let cells = m.cells();
        assert_eq!(cells.len(), 4);
        assert_eq!(cells[1].dir_name(), "py3.10-torch2.15.1");
        assert_eq!(cells[0].torch_requirement(), "torch==2.12.*");
        assert_eq!(cells[1].torch_requirement(), "torch==2.15.1");
    }

    #[test]
    fn refuses_what_is_not_a_matrix_and_says_why() {
        for (text, reason) in [
            ("", "no `python=` axis"),
            ("python=3.12", "no `torch=` axis"),
            (
                "python 3.12 torch=2.15",
                "`python` is not `AXIS=VERSION,VERSION`",
            ),
            ("cuda=12.8 python=3.12 torch=2.15", "unknown axis `cuda`"),
            (
                "python=3.12 python=3.13 torch=2.15",
                "`python` is given twice",
            ),
            (
                "python=3 torch=2.15",
                "`3` in `python=` is not a release like `3.12`",
            ),
            (
                "python=3.12 torch=2.15,",
                "`` in `torch=` is not a release like `2.15`",
            ),
            ("python=3.12 torch=nightly", "`nightly` in `torch=`"),
        ] {
            let err = text.parse::<Matrix>().unwrap_err().to_string();
            assert!(err.contains(reason), "{text:?}: {err}");
            assert!(err.contains("python=3.10,3.12 torch=2.12,2.15"), "{err}");
        }
    }

    #[test]
    fn a_cell_is_covered_by_matching_release_components() {
        let cell = MatrixCell {
            python: "3.12".into(),
            torch: "2.15".into(),
        };
        assert!(cell.is_covered_by("3.12.1", "2.15.0+cu132"));
        assert!(!cell.is_covered_by("3.11.7", "2.15.0+cu132"));
        assert!(!cell.is_covered_by("3.12.1", "2.1.0"));
        assert!(!cell.is_covered_by("3.12.1", "2.150.0"));
        let exact = MatrixCell {
            python: "3.12.1".into(),
            torch: "2.15.1".into(),
        };
        assert!(exact.is_covered_by("3.12.1", "2.15.1"));
        assert!(!exact.is_covered_by("3.12.10", "2.15.1"));
    }
}
