//! Reading a variable, with the table's rule for an empty value applied.

use std::ffi::OsString;

use crate::table::{lookup, Empty};

/// The value of `name` as UTF-8 text; `None` when unset, not UTF-8, or
/// empty (all blank) for a variable whose empty value means unset.
pub fn var(name: &str) -> Option<String> {
    var_os(name).and_then(|v| v.into_string().ok())
}

/// The raw value of `name`; `None` when unset, or empty (all blank) for a
/// variable whose empty value means unset ([`Empty::Unset`]).
pub fn var_os(name: &str) -> Option<OsString> {
    apply_empty_rule(name, std::env::var_os(name))
}

/// The table's empty rule for `name`, applied to `value` (also used by code
/// that reads variables through its own lookup, e.g. in tests).
pub(crate) fn apply_empty_rule(name: &str, value: Option<OsString>) -> Option<OsString> {
    let rule = match lookup(name) {
        Some(var) => var.empty,
        None => {
            debug_assert!(false, "`{name}` is not in abicache_env_vars::ENV_VARS");
            Empty::Unset
        }
    };
    match rule {
        Empty::AsIs => value,
        Empty::Unset => value.filter(|v| !is_blank(v)),
    }
}

fn is_blank(value: &std::ffi::OsStr) -> bool {
    value.as_encoded_bytes().iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_means_unset_unless_the_table_says_as_is() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(apply_empty_rule("ABICACHE_DIR", some("")), None);
        assert_eq!(apply_empty_rule("MAX_JOBS", some("  \t")), None);
        assert_eq!(apply_empty_rule("CXX", some(" g++ ")), some(" g++ "));
        assert_eq!(apply_empty_rule("PATH", some("")), some(""));
        assert_eq!(apply_empty_rule("ABICACHE_DIR", None), None);
    }
}
