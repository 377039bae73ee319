//! Writes include/zlink.h, the C header of src/lib.rs, with cbindgen: the
//! header is generated, never written by hand, so it cannot drift from the
//! Rust declarations. It is committed (a C or C# user reads it without a
//! Rust toolchain) and rewritten only when its text changes; .ci/run fails
//! when the committed header is not the generated one.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/lib.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let crate_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("clients/c/cbindgen.toml is readable and valid");
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses src/lib.rs");
    let mut text = Vec::new();
    bindings.write(&mut text);
    let path = crate_dir.join("include").join("zlink.h");
    if std::fs::read(&path).ok().as_deref() != Some(&text[..]) {
        std::fs::create_dir_all(path.parent().expect("include/ has a parent"))
            .expect("clients/c/include is writable");
        std::fs::write(&path, &text).expect("clients/c/include/zlink.h is writable");
    }
}
