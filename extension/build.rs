//! Compiles the thin C++ layer (cpp/) against the DuckDB v1.5.5 headers that libduckdb-sys
//! (feature `bundled`) publishes as DEP_DUCKDB_INCLUDE, with the C surface's header that cbindgen
//! generates from src/ffi.rs (include/moraine_ffi.h; `cargo xtask header`).
fn main() {
    let include = std::env::var("DEP_DUCKDB_INCLUDE")
        .expect("libduckdb-sys did not publish its include directory (DEP_DUCKDB_INCLUDE); is feature `bundled` on?");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .include(&include)
        .include("cpp")
        .include("include")
        // DuckDB's release build: never DEBUG (some classes change shape under it).
        .define("NDEBUG", None)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations");
    for entry in std::fs::read_dir("cpp").expect("cpp/ directory") {
        let path = entry.expect("cpp/ entry").path();
        if path.extension().is_some_and(|e| e == "cpp") {
            build.file(&path);
        }
        println!("cargo:rerun-if-changed={}", path.display());
    }
    build.compile("moraine_cpp");
    println!("cargo:rerun-if-changed=include/moraine_ffi.h");
    println!("cargo:rerun-if-changed=build.rs");
}
