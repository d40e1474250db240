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

#[cfg(test)]
mod tests {
    use super::*;

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
