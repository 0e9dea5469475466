//! Compiles the thin C++ layer (cpp/) against the DuckDB v1.5.5 headers that libduckdb-sys
//! (feature `bundled`) publishes as DEP_DUCKDB_INCLUDE, and the ABI test's view of
//! cpp/moraine_ffi.h (abi/).
fn main() {
    let include = std::env::var("DEP_DUCKDB_INCLUDE")
        .expect("libduckdb-sys did not publish its include directory (DEP_DUCKDB_INCLUDE); is feature `bundled` on?");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .include(&include)
        .include("cpp")
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

    // The constants and struct layouts of moraine_ffi.h as the C++ compiler sees them, which the
    // ABI test (src/abi_tests.rs) compares with Rust's. Its own archive, in the same OUT_DIR:
    // nothing is linked from it unless the test names it (`#[link(name = "moraine_abi")]`).
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .include("cpp")
        .cargo_metadata(false)
        .file("abi/moraine_abi.cpp")
        .compile("moraine_abi");
    println!("cargo:rerun-if-changed=abi/moraine_abi.cpp");
    println!("cargo:rerun-if-changed=build.rs");
}
