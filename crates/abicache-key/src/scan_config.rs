//! How an extension's sources are scanned: the one rule shared by keying
//! (`abicache key`/`build`, the façade) and `abicache scan`.

use std::path::Path;

use abicache_scan::ScanConfig;

use crate::env::Environment;
use crate::spec::ExtensionSpec;

impl ExtensionSpec {
    /// The scan configuration of this extension under the fingerprint
    /// `root`: the `-D` definitions of `extra_cflags` (and of
    /// `extra_cuda_cflags` for a CUDA extension), `extra_include_paths` in
    /// order, and the system include roots of `env`
    /// ([`Environment::system_include_roots`]).
    ///
    /// Guarantees: keying and `abicache scan` build their configuration
    /// here and nowhere else, so with the same environment they resolve
    /// every include alike. `env` is `None` when no environment is known
    /// (`abicache scan` without `--python`/`--env`): then there are no
    /// system roots, and an angle include that a local file shadows (a
    /// `torch/all.h` next to the source) is followed as a local header.
    pub fn scan_config(&self, env: Option<&Environment>, root: &Path) -> ScanConfig {
        let mut config = ScanConfig::new(root).defines_from_flags(&self.extra_cflags);
        if self.requires_cuda() {
            config = config.defines_from_flags(&self.extra_cuda_cflags);
        }
        for dir in &self.extra_include_paths {
            config = config.include_path(dir);
        }
        for dir in env
            .map(Environment::system_include_roots)
            .unwrap_or_default()
        {
            config = config.system_root(dir);
        }
        config
    }
}
