//! moraine-core: DuckLake's metadata catalog on SlateDB, without DuckDB. Data flows store ->
//! catalog kinds -> overlay -> translation -> one SlateDB write. The DuckDB extension built on it
//! is the crate in extension/. See notes/core-api.md and rfcs/.

pub mod attach;
pub(crate) mod backend;
pub mod catalog;
pub mod cell;
pub(crate) mod checkpoint;
pub mod chunk;
pub mod compression;
pub mod duckdb_types;
pub mod error;
pub mod floor;
pub mod head;
pub mod image;
pub mod keys;
pub(crate) mod kinds;
pub mod limits;
pub mod op;
pub mod overlay;
mod records;
mod row_locks;
pub mod rowset;
pub mod runtime;
pub mod s3;
pub mod scan;
pub mod serialized;
pub mod settings;
mod sst_cache;
pub mod status;
pub mod store;
pub mod tables;
pub mod telemetry;
pub mod translate;
pub mod txn;
pub mod url;
pub mod views;
pub(crate) mod write_set;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod layers;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
