//! Replays every file of the cluster fuzz corpora (`fuzz/corpus/cluster_links/`,
//! `fuzz/corpus/cluster_gateway/`) through the targets' bodies (`fuzz/cluster-targets`), as
//! cargo-fuzz runs them: the targets assert their invariants themselves, so a corpus file
//! that breaks one fails here on stable.

use std::path::PathBuf;

/// Runs `target` on every file of corpus `name`.
fn replay(name: &str, target: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the {name} corpus is empty");
    for file in &files {
        let data = std::fs::read(file).expect("read corpus file");
        if let Err(panic) = std::panic::catch_unwind(|| target(&data)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!("corpus file {} fails: {message}", file.display());
        }
    }
}

#[test]
fn cluster_links_corpus() {
    replay(
        "cluster_links",
        agentwire_fuzz_cluster_targets::cluster_links,
    );
}

#[test]
fn cluster_gateway_corpus() {
    replay(
        "cluster_gateway",
        agentwire_fuzz_cluster_targets::cluster_gateway,
    );
}
