//! Human sizes (`10G`, `500M`, `1.5GiB`) and `ABICACHE_MAX_SIZE`.

use crate::env;
use crate::error::{Result, StoreError};

/// [`abicache_env_vars::parse_size`], refusing what it cannot parse with
/// [`StoreError::BadSize`] (which says what a size looks like).
pub fn parse_size(text: &str) -> Result<u64> {
    abicache_env_vars::parse_size(text).ok_or_else(|| StoreError::BadSize {
        value: text.to_owned(),
    })
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
    fn bad_sizes_are_refused() {
        assert_eq!(parse_size("10G").unwrap(), 10 << 30);
        insta::assert_snapshot!(parse_size("10 gigs").unwrap_err().to_string());
    }
}
