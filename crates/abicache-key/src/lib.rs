//! The extension spec and environment models, the torch-version and
//! stable-ABI rules, and the cache key of abicache (docs/key.md).
//!
//! Guarantees:
//! - [`compute_key`] is a pure function of the spec, the ABI fields of the
//!   environment, the scan report and the fingerprint root: build-only paths
//!   (`torch_dir`, `python_include`, …) and the checkout's location never
//!   enter the key.
//! - The key is the first 128 bits of BLAKE3 over a self-describing
//!   [`Payload`] whose first line is `format=`[`KEY_FORMAT`]; two keys are
//!   equal exactly when their payloads are.
//! - Under an explicit [`StableTarget`] a too-old or unparseable torch is
//!   refused by [`ExtensionSpec::check_for`] before any file is read, and a
//!   non-stable torch header is an error naming the include and the file
//!   that has it.
//! - Every error is a [`KeyError`] whose message says what to do.
//!
//! ```
//! use abicache_key::{StableTarget, TorchVersion};
//!
//! let target = StableTarget::parse("2.10").unwrap();
//! assert_eq!(target.define(), "-DTORCH_TARGET_VERSION=0x020A000000000000");
//! // The runtime floor: torch 2.15 may load a 2.10 stable-ABI binary, torch 2.9 may not.
//! assert!(target.check_runtime_floor("2.15.0+cpu").is_ok());
//! let refused = target.check_runtime_floor("2.9.1").unwrap_err();
//! assert!(refused.to_string().contains("2.9.1"));
//! assert_eq!(TorchVersion::parse("2.15.0+cu128").unwrap().major_minor(), (2, 15));
//! ```

#![deny(missing_docs)]

mod arch;
mod env;
mod error;
mod payload;
mod scan_config;
mod spec;
mod stable;
mod version;

pub use arch::{gencode_flags, user_sets_arch};
pub use env::Environment;
pub use error::KeyError;
pub use payload::{
    compute_key, display_path, key_cuda_flags, native_cpu_flags, FieldChange, Keyed, Payload,
    PythonAbiReason, KEY_FORMAT, KEY_HEX_LEN,
};
pub use spec::{
    ExtensionKind, ExtensionSpec, SpecFile, CUDA_SOURCE_EXTENSIONS, HOST_SOURCE_EXTENSIONS,
};
pub use stable::{StableTarget, TARGET_MACRO};
pub use version::TorchVersion;
