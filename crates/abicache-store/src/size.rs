//! Human sizes (`10G`, `500M`, `1.5GiB`) and `ABICACHE_MAX_SIZE`.

use crate::env;
use crate::error::{Result, StoreError};

/// Parses a size in bytes: a number (fractions allowed) with an optional,
/// case-insensitive unit. `K`, `M`, `G`, `T`, `Ki`…`Ti` and `KiB`…`TiB` are
/// powers of 1024 (so `10G` is 10 GiB, as in sccache and GNU `du`); `KB`…`TB`
/// are powers of 1000; `B` or nothing is bytes. Fractions of a byte round down.
pub fn parse_size(text: &str) -> Result<u64> {
    let bad = || StoreError::BadSize {
        value: text.to_owned(),
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let unit = unit.trim().to_ascii_lowercase();
    let (letter, rest) = unit.split_at(unit.len().min(1));
    let power = match letter {
        "" | "b" if rest.is_empty() => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        _ => return Err(bad()),
    };
    let base: f64 = match rest {
        _ if power == 0 => 1.0,
        "" | "i" | "ib" => 1024.0,
        "b" => 1000.0,
        _ => return Err(bad()),
    };
    let bytes = number * base.powi(power);
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// The maximum store size from `ABICACHE_MAX_SIZE` (`None` when unset or empty).
pub fn max_size_from_env() -> Result<Option<u64>> {
    let Some(value) = env::var_os(env::ABICACHE_MAX_SIZE) else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    parse_size(&text).map(Some).map_err(|_| StoreError::BadEnv {
        var: env::ABICACHE_MAX_SIZE,
        value: text.into_owned(),
        expected: "a size such as `10G`, `500M` or `1.5GiB`",
    })
}

/// The PCH cap from `ABICACHE_PCH_MAX_SIZE` (`None` when unset or empty).
pub fn pch_max_size_from_env() -> Result<Option<u64>> {
    let Some(value) = env::var_os(env::ABICACHE_PCH_MAX_SIZE) else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    parse_size(&text).map(Some).map_err(|_| StoreError::BadEnv {
        var: env::ABICACHE_PCH_MAX_SIZE,
        value: text.into_owned(),
        expected: "a size such as `2G`, `500M` or `1.5GiB`",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(parse_size(text).unwrap(), want, "{text}");
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
        ] {
            assert!(parse_size(text).is_err(), "{text:?} accepted");
        }
        insta::assert_snapshot!(parse_size("10 gigs").unwrap_err().to_string());
    }
}
