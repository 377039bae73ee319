//! The layers' arrows run only downward (docs/core.md "Layers"): this test
//! reads every source file of the library and fails on an import of a layer
//! above the file's own, or beside it where the two must not meet (the
//! Location Store and the sans-IO core sit side by side and know nothing of
//! each other; the runtime is where their vocabularies meet).
//!
//! A reference is any `crate::<module>` path outside a comment, and any
//! `super::<module>` in a layer's root file (which names the crate root).
//!
//! It also checks the other half of the layering, the public surface: the
//! library as an embedder builds it (without the `testing` feature, which
//! this test's own build has through the self dev-dependency) refuses every
//! path into an internal layer, and the examples compile against it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// The internal layers, each with the error an embedder's `use` of it gets:
/// private (E0603), or not compiled at all (E0432: the simulator).
const INTERNAL: &[(&str, &str)] = &[
    ("core", "E0603"),
    ("wire", "E0603"),
    ("net", "E0603"),
    ("time", "E0603"),
    ("sim", "E0432"),
];

/// What the public layers re-export from the internal ones (docs/core.md
/// "Layers"): must resolve, so that a refusal above is the layer's privacy
/// and not a misspelt path.
const PUBLIC: &str = "\
use zlink::prelude::*;
use zlink::api::{ClusterSecret, DecodeLimits, FlowCounters, FlowTrace, HandshakeError};
use zlink::api::{IoBackend, ReactorError, RelocationConfig};
use zlink::client::{ClientFrame, CloseReason, WireError};
use zlink::store::{Instant, LocationStore, ManualClock};
";

/// The library and serde (the examples derive with it) as `cargo build`
/// makes them, without `testing` and in this test's target directory.
struct EmbedderBuild {
    deps: PathBuf,
    zlink: PathBuf,
    serde: PathBuf,
}

/// The rlib of the library target `name` in cargo's JSON messages.
fn rlib_of(messages: &str, name: &str) -> Option<PathBuf> {
    let target = format!("\"crate_types\":[\"lib\"],\"name\":\"{name}\"");
    let line = messages
        .lines()
        .find(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains(&target))?;
    let files = line.split("\"filenames\":[").nth(1)?.split(']').next()?;
    files
        .split(',')
        .map(|f| f.trim_matches('"'))
        .find(|f| f.ends_with(".rlib"))
        .map(PathBuf::from)
}

/// Builds the library as a dependent crate gets it: `cargo build --lib`,
/// default features, no dev-dependencies, so no `testing`. In the target
/// directory of this test (the one `cargo build` uses: .ci/run's later
/// `cargo build --bin zlink-node` finds it built).
fn embedder_build() -> EmbedderBuild {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let profile = deps.parent().unwrap();
    let target_dir = profile.parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--lib", "--message-format=json", "--manifest-path"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    if profile.ends_with("release") {
        build.arg("--release");
    }
    // The variables cargo sets for this test process are no part of a
    // top-level build's environment; left here, a build script that watches
    // them (ring's watches CARGO_MANIFEST_DIR and CARGO_PKG_*) would see them
    // change and rebuild, and the next `cargo test` rebuild it back.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CFG_"]
            .iter()
            .any(|p| name.starts_with(p))
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
                "OUT_DIR",
            ]
            .contains(&name.as_ref())
        {
            build.env_remove(name.as_ref());
        }
    }
    let out = build.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo build --lib failed:\n{}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let zlink = rlib_of(&stdout, "zlink").expect("cargo names the zlink rlib");
    let serde = rlib_of(&stdout, "serde").expect("cargo names the serde rlib");
    EmbedderBuild { deps, zlink, serde }
}

/// Type-checks `file` as a binary against the embedder's build; rustc's
/// stderr (short format) and whether it compiled.
fn check(build: &EmbedderBuild, file: &Path) -> (bool, String) {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out_dir = std::env::temp_dir().join(format!("zlink-layering-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "bin",
            "--emit=metadata",
        ])
        .args(["--error-format", "short", "--out-dir"])
        .arg(&out_dir)
        .arg("-L")
        .arg(format!("dependency={}", build.deps.display()))
        .arg("--extern")
        .arg(format!("zlink={}", build.zlink.display()))
        .arg("--extern")
        .arg(format!("serde={}", build.serde.display()))
        .arg(file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&out_dir);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_embedder_reaches_only_the_public_surface() {
    let build = embedder_build();
    let dir = std::env::temp_dir().join(format!("zlink-surface-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let public = dir.join("public.rs");
    std::fs::write(
        &public,
        format!("#![allow(unused_imports)]\n{PUBLIC}fn main() {{}}\n"),
    )
    .unwrap();
    let (ok, stderr) = check(&build, &public);
    assert!(ok, "the public re-exports must resolve:\n{stderr}");

    // One `use` per line: layer i is on line i + 2.
    let mut source = String::from("#![allow(unused_imports)]\n");
    for (layer, _) in INTERNAL {
        source.push_str(&format!("use zlink::{layer} as _;\n"));
    }
    source.push_str("fn main() {}\n");
    let internal = dir.join("internal.rs");
    std::fs::write(&internal, source).unwrap();
    let (ok, stderr) = check(&build, &internal);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "an internal layer is reachable without `testing`");
    for (i, (layer, code)) in INTERNAL.iter().enumerate() {
        let at = format!("internal.rs:{}:", i + 2);
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&at) && l.contains(&format!("error[{code}]"))),
            "`use zlink::{layer}` was not refused with {code}:\n{stderr}"
        );
    }

    // The examples are what an embedder writes: the public surface suffices.
    // (`cargo test` builds them with `testing`, through the dev-dependency.)
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut compiled = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let (ok, stderr) = check(&build, &path);
            assert!(
                ok,
                "{} needs more than the public surface:\n{stderr}",
                path.display()
            );
            compiled += 1;
        }
    }
    assert!(compiled >= 3, "only {compiled} examples compiled");
}

/// tests/mutants_suite.rs, the one test crate cargo-mutants builds for each
/// mutant (scripts/mutants.sh), names every core, wire and lane test file:
/// a file it left out would judge no mutant, and no run would say so.
#[test]
fn the_mutants_suite_names_every_core_wire_and_lane_test_file() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(&tests).expect("tests/ is readable") {
        let name = entry.expect("a directory entry").file_name();
        let name = name.to_string_lossy().into_owned();
        let judged = name.starts_with("core_") || name.starts_with("wire_") || name == "lanes.rs";
        if judged && name.ends_with(".rs") {
            files.insert(name);
        }
    }
    let suite = std::fs::read_to_string(tests.join("mutants_suite.rs"))
        .expect("tests/mutants_suite.rs is readable");
    let named: BTreeSet<String> = suite
        .lines()
        .filter_map(|line| line.strip_prefix("#[path = \""))
        .filter_map(|rest| rest.strip_suffix("\"]"))
        .map(str::to_owned)
        .collect();
    assert!(files.len() > 20, "the test files were not found: {files:?}");
    assert_eq!(
        named, files,
        "tests/mutants_suite.rs must name exactly the core_*, wire_* and lanes test files"
    );
}
