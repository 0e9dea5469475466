//! moraine: DuckLake's metadata catalog on SlateDB, as a DuckDB loadable extension.
//!
//! The core (no DuckDB dependency in its logic): data flows store -> catalog kinds -> overlay ->
//! translation -> one SlateDB write. See notes/core-api.md and rfcs/.

pub mod catalog;
pub mod cell;
pub(crate) mod checkpoint;
pub mod chunk;
pub mod error;
pub mod floor;
pub mod image;
pub mod keys;
pub(crate) mod kinds;
pub mod limits;
pub mod op;
pub mod overlay;
mod records;
mod row_locks;
pub mod s3;
pub mod selection;
mod sst_cache;
pub mod status;
pub mod store;
pub mod tables;
pub mod telemetry;
pub mod translate;
pub mod txn;
pub mod url;
pub(crate) mod write_set;

// The C surface for the C++ catalog glue, and the extension entry point.
mod ffi;
#[cfg(test)]
mod fuzz_tests;

// DuckDB v1.5.5, compiled from libduckdb-sys's bundled sources and linked statically: the
// C++ layer subclasses its catalog classes (DESIGN.md section 2).
use libduckdb_sys as _;
