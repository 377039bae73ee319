//! Writes seed inputs for the cargo-fuzz targets (fuzz/, docs/TESTING.md):
//! the `write_fuzz_corpus` tests, run by hand with `--ignored`, turn the
//! round-trip tests' values into fuzz/corpus/<target>/seed-<name>.

use std::path::PathBuf;

/// Writes `seeds` into fuzz/corpus/`target`/, each as seed-<name>.
pub fn write(target: &str, seeds: impl IntoIterator<Item = (String, Vec<u8>)>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
    }
}
