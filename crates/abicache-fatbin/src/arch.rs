//! Names of GPU architectures, device images and compute capabilities.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Error;

/// Which GPUs an architecture's code is restricted to, beyond its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ArchVariant {
    /// `sm_90`: forward compatible within its major version.
    Plain,
    /// `sm_90a`: arch-specific, runs only on exactly its capability.
    ArchSpecific,
    /// `sm_100f`: family-specific (CUDA 12.9+), runs on its family.
    FamilySpecific,
}

impl ArchVariant {
    /// The suffix nvcc writes after the number: none, `a` or `f`.
    pub fn suffix(self) -> &'static str {
        match self {
            ArchVariant::Plain => "",
            ArchVariant::ArchSpecific => "a",
            ArchVariant::FamilySpecific => "f",
        }
    }
}

/// A GPU architecture as nvcc names it: `90a` is major 9, minor 0,
/// [`ArchVariant::ArchSpecific`]. Ordered by major, minor, then variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SmArch {
    /// The major compute capability (`9` in `sm_90`, `12` in `sm_120`).
    pub major: u32,
    /// The minor compute capability, one digit (`0` in `sm_90`).
    pub minor: u32,
    /// Plain, arch-specific or family-specific.
    pub variant: ArchVariant,
}

impl SmArch {
    /// The architecture of a plain `major.minor` (`sm_{major}{minor}`).
    pub fn plain(major: u32, minor: u32) -> Self {
        SmArch {
            major,
            minor,
            variant: ArchVariant::Plain,
        }
    }

    /// The number nvcc writes, with its suffix: `90a`, `100f`, `120`.
    fn number(self) -> String {
        format!("{}{}{}", self.major, self.minor, self.variant.suffix())
    }

    /// Parses `90a`, `100f`, `120` (what follows `sm_` or `compute_`).
    /// `None` unless it is 2 to 4 digits, an optional `a`/`f`, and minor one digit.
    pub(crate) fn parse_number(text: &str) -> Option<Self> {
        let (digits, variant) = if let Some(d) = text.strip_suffix('a') {
            (d, ArchVariant::ArchSpecific)
        } else if let Some(d) = text.strip_suffix('f') {
            (d, ArchVariant::FamilySpecific)
        } else {
            (text, ArchVariant::Plain)
        };
        if !(2..=4).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let number: u32 = digits.parse().ok()?;
        (number >= 10).then_some(SmArch {
            major: number / 10,
            minor: number % 10,
            variant,
        })
    }

    /// The capability this architecture is numbered after (`9.0` for `sm_90a`).
    pub fn capability(self) -> Capability {
        Capability {
            major: self.major,
            minor: self.minor,
        }
    }
}

/// One image of device code in a fat binary: SASS (a cubin, machine code
/// for one architecture) or PTX (virtual code the driver can JIT-compile).
///
/// Displayed and parsed as nvcc names them (`sm_90a`, `compute_90`,
/// `compute_100f`), and serialized as that string. Ordered by architecture,
/// then SASS before PTX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceImage {
    /// Machine code (an ELF cubin) for this architecture: `sm_XY`.
    Sass(SmArch),
    /// PTX for this virtual architecture: `compute_XY`.
    Ptx(SmArch),
}

impl DeviceImage {
    /// The architecture the image is for.
    pub fn arch(&self) -> SmArch {
        match *self {
            DeviceImage::Sass(arch) | DeviceImage::Ptx(arch) => arch,
        }
    }

    /// Whether the image is PTX (JIT-compiled by the driver at load).
    pub fn is_ptx(&self) -> bool {
        matches!(self, DeviceImage::Ptx(_))
    }
}

impl Ord for DeviceImage {
    fn cmp(&self, other: &Self) -> Ordering {
        self.arch()
            .cmp(&other.arch())
            .then(self.is_ptx().cmp(&other.is_ptx()))
    }
}

impl PartialOrd for DeviceImage {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for DeviceImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DeviceImage::Sass(arch) => write!(f, "sm_{}", arch.number()),
            DeviceImage::Ptx(arch) => write!(f, "compute_{}", arch.number()),
        }
    }
}

impl FromStr for DeviceImage {
    type Err = Error;

    /// Parses `sm_90`, `sm_90a`, `sm_100f`, `compute_90`, `compute_100f`.
    fn from_str(text: &str) -> Result<Self, Error> {
        let bad = || Error::BadArch {
            text: text.to_string(),
            expected: "a device image such as `sm_90`, `sm_90a`, `sm_100f` or `compute_90`".into(),
        };
        if let Some(number) = text.strip_prefix("sm_") {
            SmArch::parse_number(number)
                .map(DeviceImage::Sass)
                .ok_or_else(bad)
        } else if let Some(number) = text.strip_prefix("compute_") {
            SmArch::parse_number(number)
                .map(DeviceImage::Ptx)
                .ok_or_else(bad)
        } else {
            Err(bad())
        }
    }
}

impl Serialize for DeviceImage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceImage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A GPU's compute capability, `major.minor` (`9.0` for an H100), as
/// `nvidia-smi --query-gpu=compute_cap` prints it. Displayed and parsed as
/// `"9.0"`, serialized as that string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Capability {
    /// The major version (`9` for `9.0`).
    pub major: u32,
    /// The minor version (`0` for `9.0`).
    pub minor: u32,
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for Capability {
    type Err = Error;

    /// Parses `9.0`, `12.0`, `8.6` (surrounding whitespace allowed).
    fn from_str(text: &str) -> Result<Self, Error> {
        let bad = || Error::BadArch {
            text: text.to_string(),
            expected: "a compute capability such as `9.0` or `12.0`".into(),
        };
        let (major, minor) = text.trim().split_once('.').ok_or_else(bad)?;
        let number = |s: &str| -> Option<u32> {
            (!s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        };
        Ok(Capability {
            major: number(major).ok_or_else(bad)?,
            minor: number(minor).ok_or_else(bad)?,
        })
    }
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
