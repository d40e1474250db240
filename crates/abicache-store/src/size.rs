//! Human sizes (`10G`, `500M`, `1.5GiB`).

use crate::error::{Result, StoreError};

/// [`abicache_env_vars::parse_size`], refusing what it cannot parse with
/// [`StoreError::BadSize`] (which says what a size looks like).
pub fn parse_size(text: &str) -> Result<u64> {
    abicache_env_vars::parse_size(text).ok_or_else(|| StoreError::BadSize {
        value: text.to_owned(),
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
