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

/// Parses a size in bytes: a number (fractions allowed) with an optional,
/// case-insensitive unit. `K`, `M`, `G`, `T`, `Ki`…`Ti` and `KiB`…`TiB` are
/// powers of 1024 (so `10G` is 10 GiB, as in sccache and GNU `du`); `KB`…`TB`
/// are powers of 1000; `B` or nothing is bytes. Fractions of a byte round down.
/// `None` for anything else; the reader names its variable in the error.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().ok()?;
    let unit = unit.trim().to_ascii_lowercase();
    let (letter, rest) = unit.split_at(unit.len().min(1));
    let power = match letter {
        "" | "b" if rest.is_empty() => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        _ => return None,
    };
    let base: f64 = match rest {
        _ if power == 0 => 1.0,
        "" | "i" | "ib" => 1024.0,
        "b" => 1000.0,
        _ => return None,
    };
    let bytes = number * base.powi(power);
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return None;
    }
    Some(bytes as u64)
}

/// A [`crate::ValueFormat::Flag`] value, as read by [`crate::var`] (blank
/// already counts as unset): `Some(true)` for `1` (ASCII blanks around it
/// ignored), `Some(false)` when unset or `0`, `None` for anything else, which the
/// reader refuses with an error naming its variable. The one rule for
/// `ABICACHE_REBUILD`, in Rust and (tested value for value) in Python.
///
/// Restated in Python at `python/abicache/_warm_record.py:rebuild_set` (which
/// only asks whether the value is anything but `0`; the native path then
/// reads it with this rule), tied by
/// `tests/python/test_warm_reader.py::test_abicache_rebuild_is_parsed_by_one_rule`
/// through `abicache._native.rebuild_requested`.
pub fn parse_flag(value: Option<&str>) -> Option<bool> {
    match value.map(|v| v.trim_matches(|c: char| c.is_ascii_whitespace())) {
        None | Some("") | Some("0") => Some(false),
        Some("1") => Some(true),
        Some(_) => None,
    }
}

/// What `ABICACHE_INTERCEPT` asks for ([`parse_intercept`]).
///
/// Restated in Python as what `python/_abicache_intercept.py:mode` returns
/// (`None`, `"on"`, `"verbose"`), tied by
/// `tests/python/test_intercept_and_owner_rules.py::test_abicache_intercept_is_parsed_by_one_rule`
/// through `abicache._native.intercept_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intercept {
    /// Interception off: unset, blank or `0`.
    Off,
    /// `1`: `torch.utils.cpp_extension.load` and `load_inline` become abicache's.
    On,
    /// `verbose`: on, and one line on stderr per intercepted call.
    Verbose,
}

/// The one rule for an `ABICACHE_INTERCEPT` value (`None`: unset). ASCII
/// blanks around it are ignored and blank means unset (the table's
/// [`crate::Empty::Unset`]): unset, blank or `0` is [`Intercept::Off`], `1`
/// is [`Intercept::On`], `verbose` (any case) is [`Intercept::Verbose`].
/// `None` for anything else (`true`, `yes`, `on`, `false`, …): the reader
/// leaves interception off and says so with [`intercept_refusal`].
///
/// Restated in Python at `python/_abicache_intercept.py:mode` (the start-up
/// hook imports neither the native module nor torch), tied by
/// `tests/python/test_intercept_and_owner_rules.py::test_abicache_intercept_is_parsed_by_one_rule`
/// through `abicache._native.intercept_mode`.
pub fn parse_intercept(value: Option<&str>) -> Option<Intercept> {
    let value = value.map(|v| v.trim_matches(|c: char| c.is_ascii_whitespace()));
    match value {
        None | Some("") | Some("0") => Some(Intercept::Off),
        Some("1") => Some(Intercept::On),
        Some(v) if v.eq_ignore_ascii_case("verbose") => Some(Intercept::Verbose),
        Some(_) => None,
    }
}

/// The warning for an `ABICACHE_INTERCEPT` value [`parse_intercept`]
/// refuses (`value` as it was set): names the variable, the value, the
/// accepted values and that interception stays off. Restated (word for
/// word, tested) with [`parse_intercept`].
///
/// Restated in Python at `python/_abicache_intercept.py:mode` (the
/// `ValueError` it raises, whose message the start-up hook prints on
/// stderr), tied by
/// `tests/python/test_intercept_and_owner_rules.py::test_abicache_intercept_is_parsed_by_one_rule`
/// (the message, through `abicache._native.intercept_mode`),
/// `tests/python/test_intercept_and_owner_rules.py::test_a_refused_value_leaves_interception_off_with_one_line_naming_it`
/// and `tests/python/test_intercept_and_owner_rules.py::test_an_accepted_value_says_nothing`.
pub fn intercept_refusal(value: &str) -> String {
    format!(
        "`ABICACHE_INTERCEPT={value}` is not `1`, `verbose` or `0`; interception is off. \
         Set it to `1` (or `verbose`) to turn interception on, or unset it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_is_1_or_0_or_unset() {
        assert_eq!(parse_flag(None), Some(false));
        assert_eq!(parse_flag(Some("0")), Some(false));
        assert_eq!(parse_flag(Some(" ")), Some(false));
        assert_eq!(parse_flag(Some("1")), Some(true));
        assert_eq!(parse_flag(Some(" 1\t")), Some(true));
        for bad in ["true", "yes", "no", "false", "2", "01"] {
            assert_eq!(parse_flag(Some(bad)), None, "{bad}");
        }
    }

    #[test]
    fn intercept_is_1_or_verbose_or_0_or_unset() {
        assert_eq!(parse_intercept(None), Some(Intercept::Off));
        for off in ["", " ", "\t\n", "0", " 0 "] {
            assert_eq!(parse_intercept(Some(off)), Some(Intercept::Off), "{off:?}");
        }
        assert_eq!(parse_intercept(Some("1")), Some(Intercept::On));
        assert_eq!(parse_intercept(Some(" 1\n")), Some(Intercept::On));
        for verbose in ["verbose", "VERBOSE", " Verbose\t"] {
            assert_eq!(
                parse_intercept(Some(verbose)),
                Some(Intercept::Verbose),
                "{verbose:?}"
            );
        }
        for bad in [
            "true", "false", "no", "yes", "on", "off", "2", "01", "\u{b}", "\u{a0}1",
        ] {
            assert_eq!(parse_intercept(Some(bad)), None, "{bad:?}");
        }
        let refusal = intercept_refusal("yes");
        assert!(
            refusal.contains("ABICACHE_INTERCEPT=yes") && refusal.contains("`1`, `verbose` or `0`"),
            "{refusal}"
        );
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

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        let cases = [
            ("123", 123),
            ("0", 0),
            ("123B", 123),
            ("10G", 10 << 30),
            ("10g", 10 << 30),
            ("500M", 500 << 20),
            ("1.5GiB", 3 << 29),
            ("2k", 2048),
            ("1 KiB", 1024),
            ("1Ki", 1024),
            ("500Mi", 500 << 20),
            ("10Gi", 10 << 30),
            ("2ti", 2 << 40),
            ("1KB", 1000),
            ("3MB", 3_000_000),
            ("1T", 1 << 40),
            (" 7 ", 7),
            ("0.5", 0),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text), Some(want), "{text}");
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        for text in [
            "",
            "G",
            "-1G",
            "10X",
            "10GG",
            "1.2.3M",
            "10Bi",
            "1e3",
            "99999999999T",
            "10 gigs",
        ] {
            assert_eq!(parse_size(text), None, "{text:?} accepted");
        }
    }
}
