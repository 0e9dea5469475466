//! moraine: DuckLake's metadata catalog on SlateDB, as a DuckDB loadable extension. The catalog
//! itself is moraine-core (`moraine` in code); this crate is its C surface for the C++ layer (`cpp/`), and the
//! extension's entry point.

mod ffi;

// DuckDB v1.5.5, compiled from libduckdb-sys's bundled sources and linked statically: the
// C++ layer subclasses its catalog classes (DESIGN.md section 2).
use libduckdb_sys as _;
