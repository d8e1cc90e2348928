//! The official GitHub Copilot CLI as an ACP agent for tests (`copilot --acp --stdio`), run
//! offline against a fake model endpoint with a BYOK provider: the npm package
//! `@github/copilot` (its platform binary), installed by `scripts/install-test-servers`.

use std::path::{Path, PathBuf};

/// The version `scripts/install-test-servers` installs.
pub const COPILOT_CLI_VERSION: &str = "1.0.102";

/// The Copilot CLI binary: `$AGENTWIRE_COPILOT_CLI`, else
/// `target/copilot/node_modules/@github/copilot-linux-x64/copilot` (where
/// `scripts/install-test-servers` installs it). Panics with instructions when neither exists.
pub fn copilot_cli() -> PathBuf {
    let path = std::env::var_os("AGENTWIRE_COPILOT_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let rel = "target/copilot/node_modules/@github/copilot-linux-x64/copilot";
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest
                .ancestors()
                .map(|dir| dir.join(rel))
                .find(|p| p.is_file())
                .unwrap_or_else(|| manifest.join(rel))
        });
    assert!(
        path.is_file(),
        "the Copilot CLI was not found at {}: run `scripts/install-test-servers` (it installs the \
         pinned npm package @github/copilot {COPILOT_CLI_VERSION} into target/copilot with \
         `npm install --prefix target/copilot`), or set AGENTWIRE_COPILOT_CLI to its binary",
        path.display()
    );
    path
}

/// The environment that runs the Copilot CLI offline on a BYOK provider at `base_url`
/// (an OpenAI-compatible endpoint) with `model`, its state in `home`.
pub fn offline_env(base_url: &str, model: &str, home: &Path) -> Vec<(String, String)> {
    vec![
        ("COPILOT_OFFLINE".into(), "true".into()),
        ("COPILOT_PROVIDER_BASE_URL".into(), base_url.into()),
        ("COPILOT_PROVIDER_API_KEY".into(), "test-key".into()),
        ("COPILOT_MODEL".into(), model.into()),
        ("COPILOT_HOME".into(), home.display().to_string()),
    ]
}
