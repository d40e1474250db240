//! Parsers for the value formats of the table ([`crate::ValueFormat`]) that
//! more than one crate reads.

use std::time::Duration;

/// A [`crate::ValueFormat::Seconds`] value: a finite, non-negative number of
/// seconds, fractions allowed (`600`, `0.5`), blanks around it ignored.
/// `None` for anything else; a reader that needs more than zero checks
/// [`Duration::is_zero`] and names its own variable in the error.
pub fn parse_seconds(value: &str) -> Option<Duration> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// A [`crate::ValueFormat::Flag`] value, as read by [`crate::var`] (blank
/// already counts as unset): `Some(true)` for `1` (ASCII blanks around it
/// ignored), `Some(false)` when unset, `None` for anything else, which the
/// reader refuses with an error naming its variable. The one rule for
/// `ABICACHE_REBUILD`, in Rust and (tested value for value) in Python.
pub fn parse_flag(value: Option<&str>) -> Option<bool> {
    match value.map(|v| v.trim_matches(|c: char| c.is_ascii_whitespace())) {
        None | Some("") => Some(false),
        Some("1") => Some(true),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_is_1_or_unset() {
        assert_eq!(parse_flag(None), Some(false));
        assert_eq!(parse_flag(Some(" ")), Some(false));
        assert_eq!(parse_flag(Some("1")), Some(true));
        assert_eq!(parse_flag(Some(" 1\t")), Some(true));
        for bad in ["0", "true", "yes", "no", "false", "2", "01"] {
            assert_eq!(parse_flag(Some(bad)), None, "{bad}");
        }
    }

    #[test]
    fn seconds_are_finite_non_negative_numbers() {
        assert_eq!(parse_seconds(" 60 "), Some(Duration::from_secs(60)));
        assert_eq!(parse_seconds("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_seconds("0"), Some(Duration::ZERO));
        for bad in ["", "-1", "inf", "NaN", "1e400", "10s", "ten"] {
            assert_eq!(parse_seconds(bad), None, "{bad}");
        }
    }
}
