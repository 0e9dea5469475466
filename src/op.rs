//! A staged operation: what a transaction records, in stage order, for translation at commit
//! (RFC 0006). Rows are DuckLake's own cells, untranslated.

use crate::catalog::TableDef;
use crate::cell::Row;
use std::sync::Arc;

/// One staged operation, exactly as DuckDB handed it over (rows are DuckLake's own cells).
#[derive(Debug, Clone)]
pub enum Op {
    Insert {
        schema: String,
        table: String,
        row: Row,
    },
    Update {
        schema: String,
        table: String,
        old: Row,
        new: Row,
    },
    Delete {
        schema: String,
        table: String,
        old: Row,
    },
    CreateTable(Arc<TableDef>),
    DropTable {
        schema: String,
        name: String,
    },
    CreateSchema(String),
    DropSchema(String),
}
