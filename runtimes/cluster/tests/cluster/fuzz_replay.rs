//! Replays every file of the `cluster_links` fuzz corpus (`fuzz/corpus/cluster_links/`)
//! through the target's body (`fuzz/cluster-targets`), as cargo-fuzz runs it: the target
//! asserts its invariants itself, so a corpus file that breaks one fails here on stable.

use std::path::PathBuf;

#[test]
fn cluster_links_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/cluster_links");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the cluster_links corpus is empty");
    for file in &files {
        let data = std::fs::read(file).expect("read corpus file");
        if let Err(panic) =
            std::panic::catch_unwind(|| agentwire_fuzz_cluster_targets::cluster_links(&data))
        {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!("corpus file {} fails: {message}", file.display());
        }
    }
}
