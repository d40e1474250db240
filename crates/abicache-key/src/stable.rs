//! The libtorch stable-ABI target (docs/key.md, step 3): its define, its header rule and
//! its runtime floor.

use std::fmt;

use abicache_scan::ScanReport;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::version::TorchVersion;
use crate::KeyError;

/// The macro libtorch reads to select the stable-ABI surface.
pub const TARGET_MACRO: &str = "TORCH_TARGET_VERSION";

/// An explicit libtorch stable-ABI floor `(major, minor)`.
///
/// Deserializes from `"2.10"` or `[2, 10]`; serializes as `"2.10"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StableTarget {
    /// Torch major version.
    pub major: u8,
    /// Torch minor version.
    pub minor: u8,
}

impl StableTarget {
    /// A target `(major, minor)`.
    pub fn new(major: u8, minor: u8) -> Self {
        Self { major, minor }
    }

    /// Parses `"M.m"` (exactly two decimal parts, each `0..=255`).
    pub fn parse(s: &str) -> Result<Self, KeyError> {
        let bad = || KeyError::InvalidStableTarget {
            value: s.escape_debug().to_string(),
        };
        let (m, n) = s.trim().split_once('.').ok_or_else(bad)?;
        let part = |p: &str| {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            p.parse::<u8>().map_err(|_| bad())
        };
        Ok(Self::new(part(m)?, part(n)?))
    }

    /// Builds a target from integer parts, rejecting values outside `0..=255`.
    pub fn from_parts(major: i64, minor: i64) -> Result<Self, KeyError> {
        let bad = || KeyError::InvalidStableTarget {
            value: format!("[{major}, {minor}]"),
        };
        Ok(Self::new(
            u8::try_from(major).map_err(|_| bad())?,
            u8::try_from(minor).map_err(|_| bad())?,
        ))
    }

    /// libtorch's encoding `(major << 56) | (minor << 48)`.
    pub fn encoded(&self) -> u64 {
        (u64::from(self.major) << 56) | (u64::from(self.minor) << 48)
    }

    /// `-DTORCH_TARGET_VERSION=0x020A000000000000`: 16 upper-case hex digits.
    pub fn define(&self) -> String {
        format!("-D{TARGET_MACRO}=0x{:016X}", self.encoded())
    }

    /// Adds [`define`](Self::define) to `flags` exactly once.
    ///
    /// A user flag defining the same value (in any spelling, `-DX=v` or
    /// `-D X=v`) makes this a no-op; a user flag defining another value, or
    /// the macro without a value, is [`KeyError::ConflictingTargetDefine`].
    pub fn inject(&self, flags: &mut Vec<String>) -> Result<(), KeyError> {
        let mut present = false;
        let mut i = 0;
        while i < flags.len() {
            let (body, shown) = if flags[i] == "-D" {
                let next = flags.get(i + 1).cloned().unwrap_or_default();
                i += 1;
                (next.clone(), format!("-D {next}"))
            } else if let Some(b) = flags[i].strip_prefix("-D") {
                (b.to_string(), flags[i].clone())
            } else {
                i += 1;
                continue;
            };
            i += 1;
            let (macro_name, value) = body.split_once('=').unwrap_or((&body, ""));
            if macro_name.trim() != TARGET_MACRO {
                continue;
            }
            if parse_int(value) == Some(self.encoded()) {
                present = true;
            } else {
                return Err(KeyError::ConflictingTargetDefine {
                    found: shown,
                    expected: self.define(),
                    target: self.to_string(),
                });
            }
        }
        if !present {
            flags.push(self.define());
        }
        Ok(())
    }

    /// Checks that every torch header reached by the sources belongs to the
    /// stable ABI (`torch/csrc/stable/`, `torch/headeronly/`).
    ///
    /// The first offending include is reported with the file and line that
    /// has it ([`KeyError::NonStableHeader`]); a computed include cannot be
    /// verified and is [`KeyError::ComputedIncludeUnderStable`].
    pub fn validate_headers(&self, scan: &ScanReport) -> Result<(), KeyError> {
        if let Some(t) = scan.non_stable_headers().next() {
            return Err(KeyError::NonStableHeader {
                file: t.file.clone(),
                line: t.line,
                include: t.include.clone(),
                target: self.to_string(),
            });
        }
        if let Some(c) = scan
            .sources
            .iter()
            .flat_map(|s| &s.computed_includes)
            .next()
        {
            return Err(KeyError::ComputedIncludeUnderStable {
                file: c.file.clone(),
                line: c.line,
                text: c.text.clone(),
                target: self.to_string(),
            });
        }
        Ok(())
    }

    /// Refuses a torch whose major.minor is below the target, and a torch
    /// version that cannot be parsed (fail closed).
    pub fn check_runtime_floor(&self, torch_version: &str) -> Result<(), KeyError> {
        let v = TorchVersion::parse(torch_version).map_err(|_| KeyError::UnverifiableTorch {
            target: self.to_string(),
            found: torch_version.to_string(),
        })?;
        if v.major_minor() < (u64::from(self.major), u64::from(self.minor)) {
            return Err(KeyError::TorchBelowFloor {
                target: self.to_string(),
                found: torch_version.to_string(),
            });
        }
        Ok(())
    }
}

fn parse_int(v: &str) -> Option<u64> {
    let v = v.trim().trim_end_matches(['u', 'U', 'l', 'L']);
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

impl fmt::Display for StableTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl std::str::FromStr for StableTarget {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, KeyError> {
        Self::parse(s)
    }
}

impl Serialize for StableTarget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StableTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StableTarget;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a stable-ABI target as \"M.m\" or [M, m]")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StableTarget, E> {
                StableTarget::parse(v).map_err(E::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StableTarget, A::Error> {
                let major: i64 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let minor: i64 = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                StableTarget::from_parts(major, minor).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abicache_scan::{ComputedInclude, SourceReport, TorchInclude};

    #[test]
    fn define_encoding_matches_libtorch() {
        assert_eq!(
            StableTarget::new(2, 10).define(),
            "-DTORCH_TARGET_VERSION=0x020A000000000000"
        );
        assert_eq!(
            StableTarget::new(2, 16).define(),
            "-DTORCH_TARGET_VERSION=0x0210000000000000"
        );
        assert_eq!(
            StableTarget::new(2, 9).define(),
            "-DTORCH_TARGET_VERSION=0x0209000000000000"
        );
        assert_eq!(StableTarget::new(3, 0).encoded(), 0x0300_0000_0000_0000);
    }

    #[test]
    fn parse_accepts_m_dot_m_only() {
        assert_eq!(
            StableTarget::parse("2.10").unwrap(),
            StableTarget::new(2, 10)
        );
        for bad in ["2", "2.10.1", "2.x", "", "2.256", "-1.0", "2.+1"] {
            assert!(StableTarget::parse(bad).is_err(), "{bad:?}");
        }
        assert!(StableTarget::from_parts(2, 300).is_err());
        assert!(StableTarget::from_parts(-2, 10).is_err());
    }

    #[test]
    fn inject_adds_once_and_tolerates_identical_user_define() {
        let t = StableTarget::new(2, 10);
        let mut flags = vec!["-O3".to_string()];
        t.inject(&mut flags).unwrap();
        t.inject(&mut flags).unwrap();
        assert_eq!(flags, ["-O3", "-DTORCH_TARGET_VERSION=0x020A000000000000"]);
        let mut user = vec![
            "-D".to_string(),
            "TORCH_TARGET_VERSION=0x020a000000000000".to_string(),
        ];
        t.inject(&mut user).unwrap();
        assert_eq!(
            user.len(),
            2,
            "identical define (other spelling) is a no-op"
        );
    }

    #[test]
    fn inject_rejects_a_different_user_target() {
        let t = StableTarget::new(2, 10);
        let mut flags = vec!["-DTORCH_TARGET_VERSION=0x0209000000000000".to_string()];
        let e = t.inject(&mut flags).unwrap_err();
        assert!(matches!(e, KeyError::ConflictingTargetDefine { .. }));
        let msg = e.to_string();
        assert!(
            msg.contains("0x0209000000000000") && msg.contains("0x020A000000000000"),
            "{msg}"
        );
        let mut bare = vec!["-DTORCH_TARGET_VERSION".to_string()];
        assert!(t.inject(&mut bare).is_err());
    }

    fn report(includes: &[(&str, &str, bool)], computed: bool) -> ScanReport {
        ScanReport {
            sources: vec![SourceReport {
                source: "k.cpp".into(),
                files: vec![],
                missing_includes: vec![],
                computed_includes: if computed {
                    vec![ComputedInclude {
                        file: "k.cpp".into(),
                        line: 3,
                        text: "HDR".into(),
                    }]
                } else {
                    vec![]
                },
                uses_extension_name: false,
            }],
            python_markers: vec![],
            torch_includes: includes
                .iter()
                .enumerate()
                .map(|(i, (file, inc, stable))| TorchInclude {
                    file: file.to_string(),
                    line: i as u32 + 1,
                    include: inc.to_string(),
                    stable: *stable,
                })
                .collect(),
            stable_registrations: vec![],
        }
    }

    #[test]
    fn validate_headers_names_first_offender_and_its_file() {
        let t = StableTarget::new(2, 10);
        t.validate_headers(&report(
            &[("k.cpp", "torch/csrc/stable/library.h", true)],
            false,
        ))
        .unwrap();
        let e = t
            .validate_headers(&report(
                &[
                    ("k.cpp", "torch/headeronly/util/Half.h", true),
                    ("inc/h.h", "ATen/ATen.h", false),
                ],
                false,
            ))
            .unwrap_err();
        assert!(
            matches!(&e, KeyError::NonStableHeader { file, line: 2, include, .. } if file == "inc/h.h" && include == "ATen/ATen.h")
        );
        let e = t.validate_headers(&report(&[], true)).unwrap_err();
        assert!(matches!(
            e,
            KeyError::ComputedIncludeUnderStable { line: 3, .. }
        ));
    }

    #[test]
    fn runtime_floor() {
        let t = StableTarget::new(2, 10);
        assert!(matches!(
            t.check_runtime_floor("2.9.1+cu128"),
            Err(KeyError::TorchBelowFloor { .. })
        ));
        assert!(matches!(
            t.check_runtime_floor("nightly"),
            Err(KeyError::UnverifiableTorch { .. })
        ));
        assert!(matches!(
            t.check_runtime_floor(""),
            Err(KeyError::UnverifiableTorch { .. })
        ));
        t.check_runtime_floor("2.10.0").unwrap();
        t.check_runtime_floor("2.10.0a0+git1234abc").unwrap();
        t.check_runtime_floor("2.15.0+cu130").unwrap();
        t.check_runtime_floor("3.0.0").unwrap();
        assert!(StableTarget::new(2, 16)
            .check_runtime_floor("2.15.0")
            .is_err());
    }
}
