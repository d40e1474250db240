//! The payload and its key (docs/key.md, step 4): the text format and its typed
//! accessors ([`format`]), the field-by-field difference of two payloads
//! ([`diff`]), and the key of an extension for an environment ([`key`]).

mod diff;
mod format;
mod key;

pub use diff::FieldChange;
pub use format::{display_path, Payload, KEY_FORMAT, KEY_HEX_LEN};
pub use key::{compute_key, key_cuda_flags, native_cpu_flags, Keyed, PythonAbiReason};
