//! The layers' arrows run only downward (docs/core.md "Layers"): this test
//! reads every source file of the library and fails on an import of a layer
//! above the file's own, or beside it where the two must not meet (the
//! Location Store and the sans-IO core sit side by side and know nothing of
//! each other; the runtime is where their vocabularies meet).
//!
//! A reference is any `crate::<module>` path outside a comment, and any
//! `super::<module>` in a layer's root file (which names the crate root).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each layer and the layers it may use, top to bottom.
const LAYERS: &[(&str, &[&str])] = &[
    // What an embedder imports in one line: the public layers only.
    (
        "prelude",
        &["api", "client", "typed", "store", "ids", "error"],
    ),
    (
        "api",
        &[
            "runtime", "core", "store", "net", "wire", "typed", "ids", "error", "time",
        ],
    ),
    (
        "runtime",
        &[
            "core", "store", "net", "wire", "typed", "ids", "error", "time",
        ],
    ),
    // The simulator drives the core against a store: a test harness.
    ("sim", &["core", "store", "wire", "ids", "error", "time"]),
    ("core", &["wire", "ids", "error", "time"]),
    ("store", &["ids", "error", "time"]),
    ("net", &["wire", "ids", "error"]),
    ("client", &["wire", "typed", "ids", "error"]),
    // Typed messages: serde and MessagePack over the byte payloads.
    ("typed", &["ids", "error"]),
    ("wire", &["ids", "error"]),
    ("error", &["ids"]),
    ("ids", &[]),
    ("time", &[]),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The layers `text` refers to; `root`: the file is its layer's root.
fn references(text: &str, root: bool) -> BTreeSet<String> {
    let layers: BTreeSet<&str> = LAYERS.iter().map(|(name, _)| *name).collect();
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut prefixes = vec!["crate::"];
        if root {
            prefixes.push("super::");
        }
        for prefix in prefixes {
            for (at, _) in code.match_indices(prefix) {
                let rest = &code[at + prefix.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if layers.contains(name.as_str()) {
                    found.insert(name);
                }
            }
        }
    }
    found
}

#[test]
fn every_import_points_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut violations = Vec::new();
    let mut checked = 0;
    for (layer, may_use) in &allowed {
        let single = src.join(format!("{layer}.rs"));
        let mut files = Vec::new();
        if single.exists() {
            files.push(single);
        }
        let dir = src.join(layer);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        assert!(!files.is_empty(), "layer {layer} has no source");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let root = file.ends_with(format!("{layer}.rs")) || file == dir.join("mod.rs");
            for used in references(&text, root) {
                if used != *layer && !may_use.contains(&used.as_str()) {
                    violations.push(format!("{} uses {used}", file.display()));
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} files read");
    assert!(
        violations.is_empty(),
        "upward imports:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import_and_ignores_comments() {
    let text = "use crate::api::Node; // crate::runtime\n/// crate::sim\n";
    let found = references(text, false);
    assert_eq!(found, BTreeSet::from(["api".to_owned()]));
    let root = references("use super::store::LocationStore;\n", true);
    assert_eq!(root, BTreeSet::from(["store".to_owned()]));
}
