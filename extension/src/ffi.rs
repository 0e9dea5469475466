//! The C surface the C++ layer calls (extension/cpp/moraine_ffi.h) and the extension entry point.
//!
//! Everything here only converts between C shapes and the core's types; no catalog logic.
//! No Rust panic and no C++ exception crosses this boundary: every export catches panics (an
//! export with an error out-parameter reports it there as an internal error; the others log it
//! and return their empty value), a transaction in which a call panicked refuses every later
//! call but its rollback, and the C++ callbacks we invoke catch everything themselves (they
//! keep the exception for the C++ caller to rethrow once we have returned).
//! An error crosses as its [`Kind`] code, the DuckDB exception it is thrown as ([`Exception`],
//! chosen here from the kind) and its message; the C++ layer throws that exception.

use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

use moraine::catalog::{ColumnDef, TableDef};
use moraine::cell::{Cell, Row};
use moraine::error::{Error, Kind, Result};
use moraine::rowset::{Narrowing, Selection};
use moraine::store::Store;
use moraine::txn::{Materialized, Transaction};

#[repr(C)]
pub struct MoraineError {
    ptr: *mut c_char,
    len: usize,
    /// A [`Kind`] code; 0 when there is no error.
    kind: u32,
    /// An [`Exception`] code; 0 when there is no error.
    exception: u32,
}

/// The DuckDB exception the C++ layer throws for an error (`MoraineExceptionType`). Rust
/// chooses it ([`Exception::for_kind`]); the C++ layer only throws it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Exception {
    /// `InvalidInputException`.
    InvalidInput = 1,
    /// `TransactionException`.
    Transaction = 2,
    /// `ConstraintException`.
    Constraint = 3,
    /// `CatalogException`.
    Catalog = 4,
    /// `PermissionException`.
    Permission = 5,
    /// `IOException`.
    Io = 6,
    /// `ConnectionException`.
    Connection = 7,
}

impl Exception {
    /// Every exception, in code order (the ABI test checks it against the header).
    #[cfg(test)]
    const ALL: [Exception; 7] = [
        Exception::InvalidInput,
        Exception::Transaction,
        Exception::Constraint,
        Exception::Catalog,
        Exception::Permission,
        Exception::Io,
        Exception::Connection,
    ];

    /// The exception an error of `kind` reaches DuckDB as. None of them is DuckDB's
    /// `InternalException` or `FatalException`, which invalidate the whole database instance.
    /// (DuckLake's retry of a commit reads only the message, which [`Error::duckdb_message`]
    /// words; and DuckDB reports every failed COMMIT as a `TransactionException` whatever was
    /// thrown, so the choice matters for errors outside a commit.)
    fn for_kind(kind: Kind) -> Exception {
        match kind {
            Kind::InvalidInput => Exception::InvalidInput,
            Kind::Conflict => Exception::Transaction,
            Kind::Duplicate | Kind::Constraint => Exception::Constraint,
            Kind::Catalog => Exception::Catalog,
            Kind::ReadOnly => Exception::Permission,
            // nothing was written (Io); a fenced writer and a corrupt record are told apart by
            // their message's prefix, "fenced: " and "corrupt record: "
            Kind::Io | Kind::Fenced | Kind::Corrupt => Exception::Io,
            // a commit that may or may not have been applied: SQL's "transaction resolution
            // unknown" (SQLSTATE 08007) is a connection exception, and like a lost connection
            // the attach serves nothing more until it is made again (DETACH, ATTACH)
            Kind::OutcomeUnknown => Exception::Connection,
            // a moraine bug, confined to the transaction it happened in (which only rolls back)
            Kind::Internal => Exception::Transaction,
        }
    }
}

#[repr(C)]
pub struct MoraineCell {
    tag: u8,
    i: i64,
    f: f64,
    ptr: *const u8,
    len: usize,
}

#[repr(C)]
pub struct MoraineColumnIn {
    name: *const c_char,
    name_len: usize,
    type_name: *const c_char,
    type_name_len: usize,
    type_blob: *const u8,
    type_blob_len: usize,
}

const TAG_NULL: u8 = 0;
const TAG_INT: u8 = 1;
const TAG_BOOL: u8 = 2;
const TAG_FLOAT: u8 = 3;
const TAG_TEXT: u8 = 4;
const TAG_BLOB: u8 = 5;

/// The kinds of an operator view's field (`MoraineFieldKind`).
const FIELD_TEXT: u32 = 0;
const FIELD_BIGINT: u32 = 1;
const FIELD_TIME: u32 = 2;

pub struct MoraineStore(Arc<Store>);
pub struct MoraineTxn(Mutex<Transaction>);
/// A materialization as one scan emits it: all its rows, or the positions a pushed-down filter
/// selected (ascending), which keep their rowids.
pub struct MoraineMat {
    mat: Arc<Materialized>,
    /// `schema.table`, for errors about its cells.
    table: Arc<str>,
    /// Shared by the copies of a narrowed scan ([`moraine_mat_clone`]), and with the later
    /// scans of the same rows that ask the same ([`moraine::rowset::RowSet::select`]).
    selection: Option<Arc<Selection>>,
}

impl MoraineMat {
    /// The cell at column `col` of the `index`-th selected row; `None` past the end or the row.
    fn cell(&self, index: usize, col: usize) -> Option<&Cell> {
        self.mat
            .rows
            .get(self.position(index))
            .and_then(|r| r.get(col))
    }

    fn position(&self, index: usize) -> usize {
        match &self.selection {
            Some(sel) => sel.positions.get(index).map_or(usize::MAX, |&p| p as usize),
            None => index,
        }
    }
}
pub struct MoraineRows {
    ncols: usize,
    cells: Vec<Cell>,
    /// The first cell pushed that was not a well-formed cell: its position and what was wrong.
    malformed: Option<(usize, Error)>,
}

type NameCb = extern "C" fn(ud: *mut c_void, name: *const c_char, len: usize);
type ColumnCb = extern "C" fn(
    ud: *mut c_void,
    name: *const c_char,
    len: usize,
    blob: *const u8,
    blob_len: usize,
);

fn set_error(err: *mut MoraineError, e: &Error) {
    if err.is_null() {
        return;
    }
    let bytes = e.duckdb_message().into_bytes().into_boxed_slice();
    let len = bytes.len();
    let ptr = Box::into_raw(bytes) as *mut c_char;
    let kind: Kind = e.kind();
    unsafe {
        *err = MoraineError {
            ptr,
            len,
            kind: kind as u32,
            exception: Exception::for_kind(kind) as u32,
        }
    };
}

/// What a caught panic says.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// A caught panic as the internal error it is.
fn panic_error(panic: &(dyn std::any::Any + Send)) -> Error {
    Error::Internal(format!("a panic: {}", panic_text(panic)))
}

/// Runs `f`, turning an error or a panic into `*err`.
fn guard<T>(err: *mut MoraineError, f: impl FnOnce() -> Result<T>) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Some(value),
        Ok(Err(e)) => {
            set_error(err, &e);
            None
        }
        Err(panic) => {
            set_error(err, &panic_error(&*panic));
            None
        }
    }
}

/// Runs `f` for an export with no error out-parameter: a panic is logged and gives `empty`.
fn quiet<T>(what: &str, empty: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        tracing::error!(
            "moraine internal error in {what}: a panic: {}",
            panic_text(&*panic)
        );
        empty
    })
}

fn status(ok: Option<()>) -> i32 {
    if ok.is_some() {
        0
    } else {
        1
    }
}

unsafe fn text<'a>(ptr: *const c_char, len: usize) -> Result<&'a str> {
    if len == 0 {
        return Ok("");
    }
    std::str::from_utf8(std::slice::from_raw_parts(ptr as *const u8, len))
        .map_err(|_| Error::InvalidInput("name is not valid UTF-8".into()))
}

/// `len` elements at `ptr` (which may be null when `len` is 0).
unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len)
    }
}

unsafe fn cell_from_c(c: &MoraineCell) -> Result<Cell> {
    Ok(match c.tag {
        TAG_NULL => Cell::Null,
        TAG_INT => Cell::Int(c.i),
        TAG_BOOL => Cell::Bool(c.i != 0),
        TAG_FLOAT => Cell::Float(c.f),
        TAG_TEXT => Cell::Text(
            std::str::from_utf8(slice(c.ptr, c.len))
                .map_err(|_| Error::InvalidInput("text cell is not valid UTF-8".into()))?
                .to_string(),
        ),
        TAG_BLOB => Cell::Blob(slice(c.ptr, c.len).to_vec()),
        other => return Err(Error::InvalidInput(format!("unknown cell tag {other}"))),
    })
}

fn cell_to_c(cell: &Cell) -> MoraineCell {
    let mut out = MoraineCell {
        tag: TAG_NULL,
        i: 0,
        f: 0.0,
        ptr: std::ptr::null(),
        len: 0,
    };
    match cell {
        Cell::Null => {}
        Cell::Int(i) => {
            out.tag = TAG_INT;
            out.i = *i;
        }
        Cell::Bool(b) => {
            out.tag = TAG_BOOL;
            out.i = *b as i64;
        }
        Cell::Float(f) => {
            out.tag = TAG_FLOAT;
            out.f = *f;
        }
        Cell::Text(s) => {
            out.tag = TAG_TEXT;
            out.ptr = s.as_ptr();
            out.len = s.len();
        }
        Cell::Blob(b) => {
            out.tag = TAG_BLOB;
            out.ptr = b.as_ptr();
            out.len = b.len();
        }
    }
    out
}

/// The rows pushed for `table` of `txn`, or the error naming the column of the first malformed
/// cell.
/// `columns` maps the rows' cells to the table's columns (an update's SET list); `None`: the
/// rows are whole rows.
fn rows_for(
    txn: &mut Transaction,
    schema: &str,
    table: &str,
    mut rows: MoraineRows,
    columns: Option<&[usize]>,
) -> Result<Vec<Row>> {
    if let Some((at, e)) = rows.malformed.take() {
        if matches!(e, Error::Internal(_)) {
            return Err(e);
        }
        let (row, cell) = (at / rows.ncols.max(1), at % rows.ncols.max(1));
        let col = columns.map_or(Some(cell), |c| c.get(cell).copied());
        let column = col
            .and_then(|col| {
                let def = txn.table(schema, table).ok().flatten()?;
                def.columns.get(col).map(|c| c.name.clone())
            })
            .unwrap_or_else(|| format!("#{}", col.unwrap_or(cell) + 1));
        return Err(Error::InvalidInput(format!(
            "row {} of {schema}.{table}, column {column}: {e}",
            row + 1
        )));
    }
    Ok(rows_of(rows))
}

fn rows_of(rows: MoraineRows) -> Vec<Row> {
    if rows.ncols == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(rows.cells.len() / rows.ncols);
    let mut cells = rows.cells.into_iter();
    loop {
        let row: Row = cells.by_ref().take(rows.ncols).collect();
        if row.is_empty() {
            break;
        }
        out.push(row);
    }
    out
}

/// The transaction, unless an earlier call in it panicked (while it held the transaction,
/// which may be half-changed): then it only rolls back.
fn lock(txn: &MoraineTxn) -> Result<std::sync::MutexGuard<'_, Transaction>> {
    txn.0.lock().map_err(|_| poisoned())
}

fn poisoned() -> Error {
    Error::Internal(
        "an earlier call in this transaction panicked, so it may be half-changed; it can only \
         roll back"
            .into(),
    )
}

#[no_mangle]
pub unsafe extern "C" fn moraine_error_free(err: MoraineError) {
    if !err.ptr.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            err.ptr as *mut u8,
            err.len,
        )));
    }
}

/// One store option, as the C++ layer passes it (`s3.key_id` = ..., from a DuckDB secret).
#[repr(C)]
pub struct MoraineOption {
    key: *const c_char,
    key_len: usize,
    value: *const c_char,
    value_len: usize,
}

#[no_mangle]
pub unsafe extern "C" fn moraine_store_open(
    url: *const c_char,
    url_len: usize,
    read_only: i32,
    options: *const MoraineOption,
    n_options: usize,
    err: *mut MoraineError,
) -> *mut MoraineStore {
    guard(err, || {
        let url = text(url, url_len)?;
        let mut opts = Vec::with_capacity(n_options);
        for i in 0..n_options {
            let o = &*options.add(i);
            opts.push((
                text(o.key, o.key_len)?.to_string(),
                text(o.value, o.value_len)?.to_string(),
            ));
        }
        Ok(Box::into_raw(Box::new(MoraineStore(Store::open_with(
            url,
            read_only != 0,
            &opts,
        )?))))
    })
    .unwrap_or(std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn moraine_store_free(store: *mut MoraineStore) {
    if !store.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(store))));
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_store_url(store: *mut MoraineStore, ud: *mut c_void, cb: NameCb) {
    let store = &*store;
    let url = quiet("moraine_store_url", String::new(), || {
        store.0.url().to_string()
    });
    cb(ud, url.as_ptr() as *const c_char, url.len());
}

/// One row of an operator view of two texts and an integer (`moraine_text_row_cb`).
type TextRowCb = extern "C" fn(
    ud: *mut c_void,
    a: *const c_char,
    a_len: usize,
    b: *const c_char,
    b_len: usize,
    value: i64,
);

/// Hands each of `rows` (or `None`: the error already in `err`) to `cb`; 0, or 1 on error.
unsafe fn text_rows(
    rows: Option<Vec<(String, String, i64)>>,
    ud: *mut c_void,
    cb: TextRowCb,
) -> i32 {
    let Some(rows) = rows else {
        return 1;
    };
    for (a, b, value) in rows {
        cb(
            ud,
            a.as_ptr() as *const c_char,
            a.len(),
            b.as_ptr() as *const c_char,
            b.len(),
            value,
        );
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn moraine_store_keyspace(
    store: *mut MoraineStore,
    ud: *mut c_void,
    cb: TextRowCb,
    err: *mut MoraineError,
) -> i32 {
    let store = &*store;
    let counts = guard(err, || store.0.keyspace_counts()).map(|counts| {
        counts
            .into_iter()
            .map(|(keyspace, kind, keys)| (keyspace, kind, i64::try_from(keys).unwrap_or(i64::MAX)))
            .collect()
    });
    text_rows(counts, ud, cb)
}

/// Calls `cb` with what the store at `url` would touch outside the process
/// ([`moraine::url::StoreUrl::access_path`]), for DuckDB's file-access check before the open;
/// nothing for a memory store, or a URL that does not parse (the open says why).
#[no_mangle]
pub unsafe extern "C" fn moraine_url_access_path(
    url: *const c_char,
    url_len: usize,
    ud: *mut c_void,
    cb: NameCb,
) {
    let path = quiet("moraine_url_access_path", None, || {
        text(url, url_len)
            .ok()
            .and_then(|u| moraine::url::parse(u).ok())
            .and_then(|u| u.access_path())
    });
    if let Some(path) = path {
        cb(ud, path.as_ptr() as *const c_char, path.len());
    }
}

type FieldCb = extern "C" fn(
    ud: *mut c_void,
    name: *const c_char,
    name_len: usize,
    kind: u32,
    i: i64,
    text: *const c_char,
    text_len: usize,
    is_null: bool,
);

/// Hands a row's `fields` to `cb`, one call per column, in order.
fn emit_fields(fields: Vec<(&'static str, moraine::status::Field)>, ud: *mut c_void, cb: FieldCb) {
    use moraine::status::Field;
    for (name, field) in fields {
        let (kind, i, text, null) = match &field {
            Field::Text(t) => (FIELD_TEXT, 0, t.as_deref().unwrap_or(""), t.is_none()),
            Field::Int(v) => (FIELD_BIGINT, v.unwrap_or(0), "", v.is_none()),
            Field::Time(v) => (FIELD_TIME, v.unwrap_or(0), "", v.is_none()),
        };
        cb(
            ud,
            name.as_ptr() as *const c_char,
            name.len(),
            kind,
            i,
            text.as_ptr() as *const c_char,
            text.len(),
            null,
        );
    }
}

/// The one row `row` makes of the store, handed to `cb` column by column; 0, or 1 with `*err`
/// set.
unsafe fn store_row(
    store: *mut MoraineStore,
    ud: *mut c_void,
    cb: FieldCb,
    err: *mut MoraineError,
    row: impl FnOnce(&Store) -> Result<Vec<(&'static str, moraine::status::Field)>>,
) -> i32 {
    let store = &*store;
    let Some(fields) = guard(err, || row(&store.0)) else {
        return 1;
    };
    emit_fields(fields, ud, cb);
    0
}

#[no_mangle]
pub unsafe extern "C" fn moraine_store_status(
    store: *mut MoraineStore,
    ud: *mut c_void,
    cb: FieldCb,
    err: *mut MoraineError,
) -> i32 {
    store_row(store, ud, cb, err, |s| Ok(s.status()?.fields()))
}

/// `moraine_reclaim`: reclaims the store's space now and hands over the one row saying what
/// went. `explicit`: the call runs in an explicit transaction; `read_lake`: the caller's
/// transaction has a transaction of the lake already ([`moraine::store::Caller`]).
#[no_mangle]
pub unsafe extern "C" fn moraine_store_reclaim(
    store: *mut MoraineStore,
    explicit: bool,
    read_lake: bool,
    began_micros: i64,
    ud: *mut c_void,
    cb: FieldCb,
    err: *mut MoraineError,
) -> i32 {
    let caller = moraine::store::Caller {
        explicit,
        read_lake,
        began: Some(began_micros),
    };
    store_row(store, ud, cb, err, |s| Ok(s.reclaim_for(caller)?.fields()))
}

/// The columns of `moraine_reclaim`'s row (their values mean nothing), for its bind.
#[no_mangle]
pub unsafe extern "C" fn moraine_reclaim_columns(ud: *mut c_void, cb: FieldCb) {
    emit_fields(moraine::store::Reclaimed::default().fields(), ud, cb);
}

#[no_mangle]
pub unsafe extern "C" fn moraine_store_metrics(
    store: *mut MoraineStore,
    ud: *mut c_void,
    cb: TextRowCb,
    err: *mut MoraineError,
) -> i32 {
    let store = &*store;
    text_rows(guard(err, || Ok(store.0.metrics())), ud, cb)
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_begin(
    store: *mut MoraineStore,
    err: *mut MoraineError,
) -> *mut MoraineTxn {
    let store = &*store;
    guard(err, || {
        Ok(Box::into_raw(Box::new(MoraineTxn(Mutex::new(
            store.0.begin(),
        )))))
    })
    .unwrap_or(std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_commit(txn: *mut MoraineTxn, err: *mut MoraineError) -> i32 {
    let txn = Box::from_raw(txn);
    status(guard(err, || {
        let inner = txn.0.into_inner().map_err(|_| poisoned())?;
        let store = inner.store().clone();
        // a panic inside the commit may come after its write reached the store: its outcome is
        // unknown, as after a write that outlived the time limit
        catch_unwind(AssertUnwindSafe(|| inner.commit())).unwrap_or_else(|panic| {
            Err(store.outcome_unknown(&format!("a panic in moraine ({})", panic_text(&*panic))))
        })
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_rollback(txn: *mut MoraineTxn) {
    let txn = Box::from_raw(txn);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        txn.0
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .rollback()
    }));
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_schemas(
    txn: *mut MoraineTxn,
    ud: *mut c_void,
    cb: NameCb,
    err: *mut MoraineError,
) -> i32 {
    let names = guard(err, || lock(&*txn)?.schemas());
    match names {
        Some(names) => {
            for name in names {
                cb(ud, name.as_ptr() as *const c_char, name.len());
            }
            0
        }
        None => 1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_create_schema(
    txn: *mut MoraineTxn,
    name: *const c_char,
    len: usize,
    if_not_exists: i32,
    err: *mut MoraineError,
) -> i32 {
    status(guard(err, || {
        lock(&*txn)?.create_schema(text(name, len)?, if_not_exists != 0)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_drop_schema(
    txn: *mut MoraineTxn,
    name: *const c_char,
    len: usize,
    if_exists: i32,
    err: *mut MoraineError,
) -> i32 {
    status(guard(err, || {
        lock(&*txn)?.drop_schema(text(name, len)?, if_exists != 0)
    }))
}

/// Hand one table definition to the C++ layer: its name, then each column's name and type.
unsafe fn emit_table(ud: *mut c_void, table: &TableDef, table_cb: NameCb, column_cb: ColumnCb) {
    table_cb(ud, table.name.as_ptr() as *const c_char, table.name.len());
    for column in &table.columns {
        column_cb(
            ud,
            column.name.as_ptr() as *const c_char,
            column.name.len(),
            column.type_blob.as_ptr(),
            column.type_blob.len(),
        );
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_tables(
    txn: *mut MoraineTxn,
    schema: *const c_char,
    schema_len: usize,
    ud: *mut c_void,
    table_cb: NameCb,
    column_cb: ColumnCb,
    err: *mut MoraineError,
) -> i32 {
    let tables = guard(err, || lock(&*txn)?.tables(text(schema, schema_len)?));
    match tables {
        Some(tables) => {
            for table in tables {
                emit_table(ud, &table, table_cb, column_cb);
            }
            0
        }
        None => 1,
    }
}

/// One table of `schema` by its exact name: 1 and its columns through the callbacks when it
/// exists, 0 when it does not, -1 with `err` set on failure.
#[no_mangle]
pub unsafe extern "C" fn moraine_txn_table(
    txn: *mut MoraineTxn,
    schema: *const c_char,
    schema_len: usize,
    name: *const c_char,
    name_len: usize,
    ud: *mut c_void,
    table_cb: NameCb,
    column_cb: ColumnCb,
    err: *mut MoraineError,
) -> i32 {
    let table = guard(err, || {
        lock(&*txn)?.table(text(schema, schema_len)?, text(name, name_len)?)
    });
    match table {
        Some(Some(table)) => {
            emit_table(ud, &table, table_cb, column_cb);
            1
        }
        Some(None) => 0,
        None => -1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_create_table(
    txn: *mut MoraineTxn,
    schema: *const c_char,
    schema_len: usize,
    name: *const c_char,
    name_len: usize,
    columns: *const MoraineColumnIn,
    ncolumns: usize,
    err: *mut MoraineError,
) -> i32 {
    status(guard(err, || {
        let columns = slice(columns, ncolumns);
        let columns = columns
            .iter()
            .map(|c| {
                Ok(ColumnDef {
                    name: text(c.name, c.name_len)?.to_string(),
                    type_name: text(c.type_name, c.type_name_len)?.to_string(),
                    type_blob: slice(c.type_blob, c.type_blob_len).to_vec(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let def = TableDef {
            schema: text(schema, schema_len)?.to_string(),
            name: text(name, name_len)?.to_string(),
            columns,
        };
        lock(&*txn)?.create_table(def)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_drop_table(
    txn: *mut MoraineTxn,
    schema: *const c_char,
    schema_len: usize,
    name: *const c_char,
    name_len: usize,
    err: *mut MoraineError,
) -> i32 {
    status(guard(err, || {
        lock(&*txn)?.drop_table(text(schema, schema_len)?, text(name, name_len)?)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_definitions(
    txn: *mut MoraineTxn,
    out: *mut u64,
    err: *mut MoraineError,
) -> i32 {
    match guard(err, || lock(&*txn)?.definitions()) {
        Some(Some(id)) => {
            *out = id;
            1
        }
        Some(None) => 0,
        None => -1,
    }
}

/// What a transaction's reads depend on ([`moraine::txn::Stamp`]): rows read under equal stamps
/// are equal, so the C++ layer keeps a scan's rows until the stamp changes.
#[repr(C)]
pub struct MoraineStamp {
    pub txn: u64,
    pub generation: u64,
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_stamp(
    txn: *mut MoraineTxn,
    out: *mut MoraineStamp,
    err: *mut MoraineError,
) -> i32 {
    status(guard(err, || {
        let stamp = lock(&*txn)?.stamp();
        *out = MoraineStamp {
            txn: stamp.txn,
            generation: stamp.generation,
        };
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_head_snapshot(
    txn: *mut MoraineTxn,
    lake: *const c_char,
    lake_len: usize,
    out: *mut i64,
    err: *mut MoraineError,
) -> i32 {
    match guard(err, || lock(&*txn)?.head_snapshot(text(lake, lake_len)?)) {
        Some(head) => match head {
            Some(id) => {
                *out = id;
                1
            }
            None => 0,
        },
        None => -1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_rows(
    txn: *mut MoraineTxn,
    schema: *const c_char,
    schema_len: usize,
    name: *const c_char,
    name_len: usize,
    need_history: i32,
    err: *mut MoraineError,
) -> *mut MoraineMat {
    guard(err, || {
        let (schema, name) = (text(schema, schema_len)?, text(name, name_len)?);
        let mat = lock(&*txn)?.rows(schema, name, need_history != 0)?;
        Ok(Box::into_raw(Box::new(MoraineMat {
            mat,
            table: format!("{schema}.{name}").into(),
            selection: None,
        })))
    })
    .unwrap_or(std::ptr::null_mut())
}

/// One `column IN (values)` of [`moraine_mat_narrow`].
#[repr(C)]
pub struct MoraineIn {
    pub column: usize,
    pub values: *const i64,
    pub count: usize,
}

/// One `column BETWEEN lo AND hi` (inclusive) of [`moraine_mat_narrow`].
#[repr(C)]
pub struct MoraineBetween {
    pub column: usize,
    pub lo: i64,
    pub hi: i64,
}

/// Narrow a scan to exactly the rows every one of the filters admits: each `ins` entry keeps
/// the rows whose integer `column` holds one of its values, each `ranges` entry the rows whose
/// integer `column` holds a value in `lo..=hi` (conjuncts of the query's filter that the scan
/// applies in DuckDB's stead; NULL is in none). Served from the rows' indexes, not a walk, and
/// kept with the rows for the next scan asking the same. Replaces an earlier narrowing of
/// `mat`. 0 when applied; nonzero with `err` set when it could not be (the scan must then
/// fail, not emit rows the filter rejects).
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_narrow(
    mat: *mut MoraineMat,
    ins: *const MoraineIn,
    n_ins: usize,
    ranges: *const MoraineBetween,
    n_ranges: usize,
    err: *mut MoraineError,
) -> i32 {
    let mat = &mut *mat;
    let ins = slice(ins, n_ins);
    let ranges = slice(ranges, n_ranges);
    status(guard(err, || {
        let narrowings: Vec<Narrowing> = ins
            .iter()
            .map(|i| Narrowing::In {
                column: i.column,
                values: slice(i.values, i.count).to_vec(),
            })
            .chain(ranges.iter().map(|r| Narrowing::Between {
                column: r.column,
                lo: r.lo,
                hi: r.hi,
            }))
            .collect();
        mat.selection = mat.mat.rows.0.select(&narrowings);
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_len(mat: *const MoraineMat) -> usize {
    let mat = &*mat;
    quiet("moraine_mat_len", 0, || match &mat.selection {
        Some(sel) => sel.positions.len(),
        None => mat.mat.rows.len(),
    })
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_rowid(mat: *const MoraineMat, index: usize) -> i64 {
    let mat = &*mat;
    quiet("moraine_mat_rowid", -1, || {
        moraine::txn::rowid(mat.mat.id, mat.position(index))
    })
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_cell(
    mat: *const MoraineMat,
    row: usize,
    col: usize,
    out: *mut MoraineCell,
) {
    let mat = &*mat;
    *out = quiet("moraine_mat_cell", cell_to_c(&Cell::Null), || {
        cell_to_c(mat.cell(row, col).unwrap_or(&Cell::Null))
    });
}

/// Rows `start..start + count` of integer column `col` into `values`, with `valid[i]` 0 for a
/// NULL (and for a row past the end), and into `nulls` how many of them are NULL: a whole
/// vector in one call. A value matters only where it is valid: when every one is NULL, `values`
/// may be left unwritten (the caller emits a constant NULL; DuckLake's `end_snapshot` of live
/// rows is such a column). An unnarrowed or densely narrowed scan copies from the column the row
/// set keeps as integers; a sparse selection (an index lookup of a few rows) reads its rows
/// directly rather than build that column. Returns false, writing nothing to rely on, when a
/// cell read is not an integer or NULL (the caller then reads cell by cell).
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_ints(
    mat: *const MoraineMat,
    start: usize,
    count: usize,
    col: usize,
    values: *mut i64,
    valid: *mut u8,
    nulls: *mut usize,
) -> bool {
    *nulls = 0;
    if count == 0 {
        return true;
    }
    // (on a panic: false, and the caller reads cell by cell)
    quiet("moraine_mat_ints", false, || {
        mat_ints(&*mat, start, count, col, values, valid)
            .map(|n| *nulls = n)
            .is_some()
    })
}

/// [`moraine_mat_ints`]: the number of NULLs written, `None` when a cell is not an integer or
/// NULL.
unsafe fn mat_ints(
    mat: &MoraineMat,
    start: usize,
    count: usize,
    col: usize,
    values: *mut i64,
    valid: *mut u8,
) -> Option<usize> {
    let values = std::slice::from_raw_parts_mut(values, count);
    let valid = std::slice::from_raw_parts_mut(valid, count);
    let rows = &mat.mat.rows.0;
    let sparse = mat
        .selection
        .as_ref()
        .is_some_and(|sel| rows.few(sel.positions.len()));
    if sparse {
        let mut nulls = 0;
        for i in 0..count {
            match start.checked_add(i).and_then(|r| mat.cell(r, col)) {
                Some(Cell::Int(v)) => {
                    values[i] = *v;
                    valid[i] = 1;
                }
                Some(Cell::Null) | None => {
                    valid[i] = 0;
                    nulls += 1;
                }
                Some(_) => return None,
            }
        }
        return Some(nulls);
    }
    let column = rows.int_column(col)?;
    match &mat.selection {
        None => {
            let len = column.values.len();
            let from = start.min(len);
            let end = start.saturating_add(count).min(len);
            let n = end - from;
            valid[..n].copy_from_slice(&column.valid[from..end]);
            valid[n..].fill(0);
            // (rows past the end count as NULL)
            let nulls = count - n
                + match column.nulls {
                    0 => 0,
                    all if all == column.values.len() => n,
                    _ => nulls_in(&valid[..n]),
                };
            if nulls < count {
                values[..n].copy_from_slice(&column.values[from..end]);
            }
            Some(nulls)
        }
        Some(sel) => {
            for i in 0..count {
                match start
                    .checked_add(i)
                    .and_then(|r| sel.positions.get(r))
                    .map(|&p| p as usize)
                {
                    Some(p) if p < column.values.len() => {
                        values[i] = column.values[p];
                        valid[i] = column.valid[p];
                    }
                    _ => valid[i] = 0,
                }
            }
            Some(nulls_in(valid))
        }
    }
}

/// How many of `valid`'s flags (each 0 or 1) say NULL: eight flags per population count.
fn nulls_in(valid: &[u8]) -> usize {
    let words = valid.chunks_exact(8);
    let rest: usize = words.remainder().iter().map(|&v| usize::from(v)).sum();
    let ones: usize = words
        .map(|w| u64::from_ne_bytes(w.try_into().unwrap_or_default()).count_ones() as usize)
        .sum();
    valid.len() - ones - rest
}

/// What an integer column's emitted rows hold (planning statistics).
#[repr(C)]
pub struct MoraineIntStats {
    pub min: i64,
    pub max: i64,
    /// Whether a row holds a value (`min` and `max` are meaningful only then).
    pub has_value: bool,
    pub has_null: bool,
}

/// The bounds of integer column `col` over the rows the scan emits (its selection, or every
/// row). Returns false, writing nothing to rely on, when a cell there is not an integer or
/// NULL.
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_int_stats(
    mat: *const MoraineMat,
    col: usize,
    out: *mut MoraineIntStats,
) -> bool {
    let mat = &*mat;
    let Some(bounds) = quiet("moraine_mat_int_stats", None, || {
        let rows = &mat.mat.rows.0;
        let Some(sel) = &mat.selection else {
            // every row: the row set keeps the bounds
            return rows.int_bounds(col, None);
        };
        sel.int_bounds(rows, col)
    }) else {
        return false;
    };
    let (min, max) = bounds.range.unwrap_or((0, 0));
    *out = MoraineIntStats {
        min,
        max,
        has_value: bounds.range.is_some(),
        has_null: bounds.has_null,
    };
    true
}

/// Another handle on the same materialization, narrowed the same way (the selection is shared,
/// not copied): a scan's planning callbacks narrow once and hand out copies.
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_clone(mat: *const MoraineMat) -> *mut MoraineMat {
    let mat = &*mat;
    Box::into_raw(Box::new(MoraineMat {
        mat: mat.mat.clone(),
        table: mat.table.clone(),
        selection: mat.selection.clone(),
    }))
}

/// What a stored cell is, for an error message: its kind and its value (long text and blobs
/// shortened).
fn describe_cell(cell: Option<&Cell>) -> String {
    const SHOWN: usize = 64;
    match cell {
        None => "no cell".into(),
        Some(Cell::Null) => "NULL".into(),
        Some(Cell::Int(v)) => format!("the integer {v}"),
        Some(Cell::Bool(v)) => format!("the boolean {v}"),
        Some(Cell::Float(v)) => format!("the floating-point number {v}"),
        Some(Cell::Text(t)) => {
            let shown: String = t.chars().take(SHOWN).collect();
            let more = if shown.len() < t.len() { "..." } else { "" };
            format!("the text {shown:?}{more} ({} bytes)", t.len())
        }
        Some(Cell::Blob(b)) => {
            let hex: String = b
                .iter()
                .take(SHOWN / 2)
                .map(|x| format!("{x:02x}"))
                .collect();
            let more = if b.len() > SHOWN / 2 { "..." } else { "" };
            format!(
                "a serialized DuckDB value of {} bytes ({hex}{more})",
                b.len()
            )
        }
    }
}

/// The error for a stored cell the C++ layer cannot write into its column: a corrupt record
/// (it reaches DuckDB as an `IOException`, never as the `InternalException` that would end the
/// database instance), naming the table, the column and its type, the row and what is stored.
/// `why` says what failed, if more than that the column cannot hold the value.
fn misfit(
    table: &str,
    column: &str,
    column_type: &str,
    rowid: i64,
    cell: Option<&Cell>,
    why: &str,
) -> Error {
    let which = if why.is_empty() {
        format!("which {column_type} cannot hold")
    } else {
        format!("which {why}")
    };
    Error::Corrupt(format!(
        "{table}, column {column} ({column_type}), rowid {rowid}: the store holds {}, {which}",
        describe_cell(cell)
    ))
}

/// Sets `err` to the error for the cell at column `col` of the `index`-th row of `mat`, which
/// the C++ layer could not write into its column (`column`, of DuckDB type `column_type`;
/// `why`, possibly empty, says what failed): [`misfit`].
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_misfit(
    mat: *const MoraineMat,
    index: usize,
    col: usize,
    column: *const c_char,
    column_len: usize,
    column_type: *const c_char,
    column_type_len: usize,
    why: *const c_char,
    why_len: usize,
    err: *mut MoraineError,
) {
    let mat = &*mat;
    let lossy = |ptr: *const c_char, len: usize| {
        String::from_utf8_lossy(slice(ptr as *const u8, len)).into_owned()
    };
    let e = catch_unwind(AssertUnwindSafe(|| {
        misfit(
            &mat.table,
            &lossy(column, column_len),
            &lossy(column_type, column_type_len),
            moraine::txn::rowid(mat.mat.id, mat.position(index)),
            mat.cell(index, col),
            &lossy(why, why_len),
        )
    }))
    .unwrap_or_else(|panic| panic_error(&*panic));
    set_error(err, &e);
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_free(mat: *mut MoraineMat) {
    if !mat.is_null() {
        drop(Box::from_raw(mat));
    }
}

#[no_mangle]
pub extern "C" fn moraine_rows_new(ncols: usize) -> *mut MoraineRows {
    Box::into_raw(Box::new(MoraineRows {
        ncols,
        cells: Vec::new(),
        malformed: None,
    }))
}

/// Appends one cell. A malformed one (bad UTF-8, an unknown tag) is kept as NULL and remembered:
/// the stage call that takes these rows then fails naming its table and column.
#[no_mangle]
pub unsafe extern "C" fn moraine_rows_push(rows: *mut MoraineRows, cell: *const MoraineCell) {
    let rows = &mut *rows;
    let cell = catch_unwind(AssertUnwindSafe(|| cell_from_c(&*cell)))
        .unwrap_or_else(|panic| Err(panic_error(&*panic)));
    let cell = cell.unwrap_or_else(|e| {
        if rows.malformed.is_none() {
            rows.malformed = Some((rows.cells.len(), e));
        }
        Cell::Null
    });
    rows.cells.push(cell);
}

#[no_mangle]
pub unsafe extern "C" fn moraine_rows_len(rows: *const MoraineRows) -> usize {
    let rows = &*rows;
    if rows.ncols == 0 {
        0
    } else {
        rows.cells.len() / rows.ncols
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_rows_free(rows: *mut MoraineRows) {
    if !rows.is_null() {
        drop(Box::from_raw(rows));
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_stage_insert(
    txn: *mut MoraineTxn,
    schema: *const c_char,
    schema_len: usize,
    name: *const c_char,
    name_len: usize,
    rows: *mut MoraineRows,
    err: *mut MoraineError,
) -> i32 {
    let rows = *Box::from_raw(rows);
    status(guard(err, || {
        let (schema, name) = (text(schema, schema_len)?, text(name, name_len)?);
        let mut txn = lock(&*txn)?;
        let rows = rows_for(&mut txn, schema, name, rows, None)?;
        txn.stage_insert(schema, name, rows)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_stage_update(
    txn: *mut MoraineTxn,
    schema: *const c_char,
    schema_len: usize,
    name: *const c_char,
    name_len: usize,
    rowids: *const i64,
    nrowids: usize,
    cols: *const usize,
    ncols: usize,
    rows: *mut MoraineRows,
    err: *mut MoraineError,
) -> i32 {
    let rows = *Box::from_raw(rows);
    status(guard(err, || {
        let rowids = slice(rowids, nrowids);
        let cols = slice(cols, ncols);
        let (schema, name) = (text(schema, schema_len)?, text(name, name_len)?);
        let mut txn = lock(&*txn)?;
        let values = rows_for(&mut txn, schema, name, rows, Some(cols))?;
        let mut updates: Vec<(i64, Row)> = Vec::with_capacity(rowids.len());
        let mut position = std::collections::HashMap::new();
        for (i, rowid) in rowids.iter().enumerate() {
            let (mat, index) = txn.resolve(*rowid)?;
            // (resolve checked the index)
            let mut row = mat.rows.get(index).cloned().unwrap_or_default();
            for (j, col) in cols.iter().enumerate() {
                let value = values.get(i).and_then(|v| v.get(j)).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "update of {schema}.{name}: row {} carries no value for column #{}",
                        i + 1,
                        j + 1
                    ))
                })?;
                let slot = row.get_mut(*col).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "update of {schema}.{name}: column #{} does not exist",
                        col + 1
                    ))
                })?;
                *slot = value.clone();
            }
            // `UPDATE ... FROM (VALUES ...)` may name one row twice; the last assignment wins,
            // as in DuckDB's own tables.
            match position.get(rowid) {
                Some(&at) => updates[at] = (*rowid, row),
                None => {
                    position.insert(*rowid, updates.len());
                    updates.push((*rowid, row));
                }
            }
        }
        txn.stage_update(schema, name, updates)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_stage_delete(
    txn: *mut MoraineTxn,
    schema: *const c_char,
    schema_len: usize,
    name: *const c_char,
    name_len: usize,
    rowids: *const i64,
    nrowids: usize,
    err: *mut MoraineError,
) -> i32 {
    status(guard(err, || {
        let rowids = slice(rowids, nrowids);
        lock(&*txn)?.stage_delete(
            text(schema, schema_len)?,
            text(name, name_len)?,
            rowids.to_vec(),
        )
    }))
}

extern "C-unwind" {
    fn moraine_cpp_register(loader: *mut c_void);
}

/// DuckDB v1.5.5 calls `<name>_duckdb_cpp_init(duckdb::ExtensionLoader &)` for a C++-ABI extension.
#[no_mangle]
pub unsafe extern "C-unwind" fn moraine_duckdb_cpp_init(loader: *mut c_void) {
    moraine::telemetry::install();
    moraine_cpp_register(loader);
}

/// moraine's version as the extension's footer carries it (`v` and the crate's version, what
/// `duckdb_extensions()` shows), NUL-terminated.
#[no_mangle]
pub extern "C" fn moraine_version() -> *const c_char {
    concat!("v", env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// The default of moraine's DuckDB setting `name` (NUL-terminated, static); NULL for a name
/// that is not one of the settings whose default Rust holds.
#[no_mangle]
pub unsafe extern "C" fn moraine_setting_default(name: *const c_char) -> *const c_char {
    static LOG: OnceLock<std::ffi::CString> = OnceLock::new();
    static MAX_COMMIT: OnceLock<std::ffi::CString> = OnceLock::new();
    static IO_TIMEOUT: OnceLock<std::ffi::CString> = OnceLock::new();
    static READER_POLL: OnceLock<std::ffi::CString> = OnceLock::new();
    static RECLAIM: OnceLock<std::ffi::CString> = OnceLock::new();
    let c = |cell: &'static OnceLock<std::ffi::CString>, text: &dyn Fn() -> String| {
        cell.get_or_init(|| std::ffi::CString::new(text()).expect("no NUL in it"))
            .as_ptr()
    };
    let millis = |d: std::time::Duration| format!("{} milliseconds", d.as_millis());
    match std::ffi::CStr::from_ptr(name).to_bytes() {
        b"moraine_log_level" => c(&LOG, &|| moraine::telemetry::DEFAULT_FILTER.into()),
        b"moraine_max_commit_size" => c(&MAX_COMMIT, &|| {
            moraine::limits::DEFAULT_MAX_COMMIT_SIZE.into()
        }),
        b"moraine_io_timeout" => c(&IO_TIMEOUT, &|| millis(moraine::store::DEFAULT_IO_TIMEOUT)),
        b"moraine_reader_poll_interval" => c(&READER_POLL, &|| {
            millis(moraine::store::DEFAULT_READER_POLL)
        }),
        b"moraine_reclaim_interval" => c(&RECLAIM, &|| {
            millis(moraine::store::DEFAULT_RECLAIM_INTERVAL)
        }),
        _ => std::ptr::null(),
    }
}

/// Checks a `moraine_max_commit_size` value as the attach will read it; 0 when it parses.
#[no_mangle]
pub unsafe extern "C" fn moraine_check_max_commit_size(
    text_ptr: *const c_char,
    len: usize,
    err: *mut MoraineError,
) -> i32 {
    match guard(err, || moraine::limits::parse_size(text(text_ptr, len)?)) {
        Some(_) => 0,
        None => 1,
    }
}

/// `SET moraine_log_level = spec` (see [`moraine::telemetry::Filter::parse`]); 0 on success.
#[no_mangle]
pub unsafe extern "C" fn moraine_set_log_level(
    spec: *const c_char,
    len: usize,
    err: *mut MoraineError,
) -> i32 {
    match guard(err, || moraine::telemetry::set_filter(text(spec, len)?)) {
        Some(()) => 0,
        None => 1,
    }
}

/// moraine_ffi.h against the types and constants above (and [`Kind`]).
#[cfg(test)]
#[path = "abi_tests.rs"]
mod abi_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use moraine::testing::{mem_url, new_lake};

    const M: &str = "main";

    unsafe fn taken(err: &mut MoraineError) -> (u32, String) {
        let text =
            String::from_utf8_lossy(std::slice::from_raw_parts(err.ptr as *const u8, err.len))
                .into_owned();
        let kind = err.kind;
        moraine_error_free(std::ptr::replace(err, no_error()));
        (kind, text)
    }

    fn no_error() -> MoraineError {
        MoraineError {
            ptr: std::ptr::null_mut(),
            len: 0,
            kind: 0,
            exception: 0,
        }
    }

    #[test]
    fn a_transaction_that_saw_a_panic_only_rolls_back() {
        let store = new_lake(&mem_url("ffi-panic"));
        let head = store.head().unwrap();
        let handle = Box::into_raw(Box::new(MoraineStore(store.clone())));
        unsafe {
            let mut err = no_error();
            let txn = moraine_txn_begin(handle, &mut err);
            assert!(!txn.is_null());
            // a panic while a call holds the transaction (as one in the core would)
            let _ = catch_unwind(AssertUnwindSafe(|| {
                let _held = (*txn).0.lock().unwrap();
                panic!("injected");
            }));
            let mut names = Vec::<String>::new();
            extern "C" fn collect(ud: *mut c_void, name: *const c_char, len: usize) {
                let names = unsafe { &mut *(ud as *mut Vec<String>) };
                let bytes = unsafe { std::slice::from_raw_parts(name as *const u8, len) };
                names.push(String::from_utf8_lossy(bytes).into_owned());
            }
            let listed =
                moraine_txn_schemas(txn, &mut names as *mut _ as *mut c_void, collect, &mut err);
            assert_ne!(listed, 0);
            let (kind, text) = taken(&mut err);
            assert_eq!(kind, Kind::Internal as u32, "{text}");
            assert!(
                text.contains("panicked") && text.contains("roll back"),
                "{text}"
            );
            // its commit is refused as well, and writes nothing
            assert_ne!(moraine_txn_commit(txn, &mut err), 0);
            let (kind, text) = taken(&mut err);
            assert_eq!(kind, Kind::Internal as u32, "{text}");
            assert_eq!(store.head().unwrap(), head);
            // the store itself is fine: the next transaction works
            let txn = moraine_txn_begin(handle, &mut err);
            assert_eq!(
                moraine_txn_schemas(txn, &mut names as *mut _ as *mut c_void, collect, &mut err),
                0
            );
            assert!(names.contains(&"main".to_string()), "{names:?}");
            moraine_txn_rollback(txn);
            moraine_store_free(handle);
        }
    }

    /// Stages the rows pushed into `rows` as an insert into `table` of the main lake.
    unsafe fn stage_insert(
        txn: *mut MoraineTxn,
        table: &str,
        rows: *mut MoraineRows,
        err: &mut MoraineError,
    ) -> i32 {
        moraine_txn_stage_insert(
            txn,
            M.as_ptr() as *const c_char,
            M.len(),
            table.as_ptr() as *const c_char,
            table.len(),
            rows,
            err,
        )
    }

    /// This transaction's rows of `table` in the main lake (with ended versions when
    /// `history`); fails the test when they cannot be read.
    unsafe fn read_rows(
        txn: *mut MoraineTxn,
        table: &str,
        history: bool,
        err: &mut MoraineError,
    ) -> *mut MoraineMat {
        let mat = moraine_txn_rows(
            txn,
            M.as_ptr() as *const c_char,
            M.len(),
            table.as_ptr() as *const c_char,
            table.len(),
            i32::from(history),
            err,
        );
        assert!(!mat.is_null());
        mat
    }

    /// `moraine_mat_ints` against `moraine_mat_cell`, vector by vector, over columns whose cells
    /// are never, sometimes and always NULL, unnarrowed and narrowed (densely and sparsely): the
    /// same values and validity, and `nulls` counts exactly the NULLs (all of them in a vector
    /// of an all-NULL column, which the scan emits as a constant).
    #[test]
    fn integer_vectors_count_their_nulls() {
        let store = new_lake(&mem_url("ffi-ints"));
        let handle = Box::into_raw(Box::new(MoraineStore(store)));
        let table = "ducklake_data_file";
        let def = moraine::catalog::fixed_table_def(M, table).unwrap();
        let col = |name: &str| def.columns.iter().position(|c| c.name == name).unwrap();
        let (id, end, partition) = (
            col("data_file_id"),
            col("end_snapshot"),
            col("partition_id"),
        );
        let n = 5000;
        unsafe {
            let mut err = no_error();
            let txn = moraine_txn_begin(handle, &mut err);
            (*txn).0.lock().unwrap().create_table(def.clone()).unwrap();
            let rows = moraine_rows_new(def.columns.len());
            for r in 0..n {
                for (c, column) in def.columns.iter().enumerate() {
                    let cell = match c {
                        _ if c == end => Cell::Null,
                        _ if c == partition && r % 3 == 0 => Cell::Null,
                        _ if c == id => Cell::Int(r),
                        _ if column.type_name == "BIGINT" => Cell::Int(r % 7),
                        _ if column.type_name == "VARCHAR" => Cell::Text(format!("f{r}")),
                        _ => Cell::Null,
                    };
                    moraine_rows_push(rows, &cell_to_c(&cell));
                }
            }
            assert_eq!(
                stage_insert(txn, table, rows, &mut err),
                0,
                "{:?}",
                taken(&mut err)
            );
            let whole = read_rows(txn, table, true, &mut err);
            let dense = read_rows(txn, table, true, &mut err);
            let range = MoraineBetween {
                column: id,
                lo: 100,
                hi: 4000,
            };
            assert_eq!(
                moraine_mat_narrow(dense, std::ptr::null(), 0, &range, 1, &mut err),
                0
            );
            let sparse = read_rows(txn, table, true, &mut err);
            let few = [3, 2048, 4999];
            let chosen = MoraineIn {
                column: id,
                values: few.as_ptr(),
                count: few.len(),
            };
            assert_eq!(
                moraine_mat_narrow(sparse, &chosen, 1, std::ptr::null(), 0, &mut err),
                0
            );
            for (mat, len) in [(whole, n as usize), (dense, 3901), (sparse, 3)] {
                assert_eq!(moraine_mat_len(mat), len);
                for column in [id, end, partition] {
                    let mut start = 0;
                    while start < len {
                        let count = (len - start).min(2048);
                        let mut values = vec![-1_i64; count];
                        let mut valid = vec![7_u8; count];
                        let mut nulls = usize::MAX;
                        assert!(moraine_mat_ints(
                            mat,
                            start,
                            count,
                            column,
                            values.as_mut_ptr(),
                            valid.as_mut_ptr(),
                            &mut nulls
                        ));
                        let mut want_nulls = 0;
                        for i in 0..count {
                            let mut cell = cell_to_c(&Cell::Null);
                            moraine_mat_cell(mat, start + i, column, &mut cell);
                            if cell.tag == TAG_NULL {
                                want_nulls += 1;
                                assert_eq!(valid[i], 0, "column {column} row {}", start + i);
                            } else {
                                assert_eq!(cell.tag, TAG_INT);
                                assert_eq!((valid[i], values[i]), (1, cell.i));
                            }
                        }
                        assert_eq!(nulls, want_nulls, "column {column} rows {start}+{count}");
                        if column == end {
                            assert_eq!(nulls, count);
                        }
                        if column == id {
                            assert_eq!(nulls, 0);
                        }
                        start += count;
                    }
                }
                moraine_mat_free(mat);
            }
            moraine_txn_rollback(txn);
            moraine_store_free(handle);
        }
    }

    /// DuckLake 1.5.5's `RetryOnError`: the words it retries a commit on.
    fn retried_by_ducklake(message: &str) -> bool {
        let m = message.to_lowercase();
        ["conflict", "primary key", "unique", "concurrent"]
            .iter()
            .any(|w| m.contains(w))
    }

    /// What DuckDB and DuckLake see of each kind of error: the exception the C++ layer throws,
    /// the message's prefix, and whether DuckLake retries a commit failing with it.
    #[test]
    fn each_kind_reaches_duckdb_as_its_exception() {
        let store = new_lake(&mem_url("ffi-kinds"));
        let unknown = store.outcome_unknown("the write did not finish within 1s");
        let after = store.begin().head_snapshot(M).unwrap_err();
        let reason = || "409 Conflict from a table named unique_ids".to_string();
        let cases = [
            (
                Error::InvalidInput(reason()),
                Exception::InvalidInput,
                "invalid input: ",
                false,
            ),
            (
                Error::Conflict(reason()),
                Exception::Transaction,
                "transaction conflict: ",
                true,
            ),
            (
                Error::Duplicate(reason()),
                Exception::Constraint,
                "constraint violation: ",
                true,
            ),
            (
                Error::Constraint(reason()),
                Exception::Constraint,
                "constraint violation: ",
                false,
            ),
            (
                Error::Catalog(reason()),
                Exception::Catalog,
                "catalog error: ",
                false,
            ),
            (
                Error::ReadOnly(reason()),
                Exception::Permission,
                "lake is attached read-only: ",
                false,
            ),
            (
                Error::Storage(reason()),
                Exception::Io,
                "storage error: ",
                false,
            ),
            (
                Error::Unreachable {
                    location: "s3://b/meta".into(),
                    reason: reason(),
                },
                Exception::Io,
                "cannot reach s3://b/meta: ",
                false,
            ),
            (
                unknown,
                Exception::Connection,
                "the outcome of the commit is unknown: ",
                false,
            ),
            (
                after,
                Exception::Connection,
                "the outcome of the commit is unknown: ",
                false,
            ),
            (
                Error::OutcomeUnknown(reason()),
                Exception::Connection,
                "the outcome of the commit is unknown: ",
                false,
            ),
            (Error::Fenced(reason()), Exception::Io, "fenced: ", false),
            (
                Error::Corrupt(reason()),
                Exception::Io,
                "corrupt record: ",
                false,
            ),
            (
                Error::Internal(reason()),
                Exception::Transaction,
                "moraine internal error: ",
                false,
            ),
        ];
        for (e, exception, prefix, retried) in cases {
            let mut err = no_error();
            set_error(&mut err, &e);
            assert_eq!(err.exception, exception as u32, "{e}");
            let (kind, text) = unsafe { taken(&mut err) };
            assert_eq!(kind, e.kind() as u32, "{e}");
            assert!(text.starts_with(prefix), "{text}");
            assert_eq!(retried_by_ducklake(&text), retried, "{text}");
        }
        // a commit of unknown outcome is the one error DuckDB sees as a Connection Error, and
        // its messages say it may or may not have been applied, unlike an I/O failure's
        for kind in Kind::ALL {
            let exception = Exception::for_kind(kind);
            assert_eq!(
                exception == Exception::Connection,
                kind == Kind::OutcomeUnknown,
                "{kind:?}"
            );
        }
        let unknown = store.outcome_unknown("a panic in moraine (boom)");
        let after = store.begin().head_snapshot(M).unwrap_err();
        for e in [unknown, after] {
            let text = e.duckdb_message();
            assert!(
                text.contains("may or may not have been applied") && text.contains("ATTACH again"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_stored_cell_its_column_cannot_hold_is_a_corrupt_record_naming_it() {
        let store = new_lake(&mem_url("ffi-misfit"));
        let handle = Box::into_raw(Box::new(MoraineStore(store)));
        let table = "ducklake_metadata";
        let def = moraine::catalog::fixed_table_def(M, table).unwrap();
        let (column, ty) = (def.columns[0].name.as_str(), "INTEGER");
        unsafe {
            let mut err = no_error();
            let txn = moraine_txn_begin(handle, &mut err);
            let mat = read_rows(txn, table, false, &mut err);
            let mut cell = cell_to_c(&Cell::Null);
            moraine_mat_cell(mat, 0, 0, &mut cell);
            assert_eq!(cell.tag, TAG_TEXT);
            let stored = String::from_utf8_lossy(slice(cell.ptr, cell.len)).into_owned();
            let rowid = moraine_mat_rowid(mat, 0);
            moraine_mat_misfit(
                mat,
                0,
                0,
                column.as_ptr() as *const c_char,
                column.len(),
                ty.as_ptr() as *const c_char,
                ty.len(),
                std::ptr::null(),
                0,
                &mut err,
            );
            assert_eq!(err.exception, Exception::Io as u32);
            let (kind, text) = taken(&mut err);
            assert_eq!(kind, Kind::Corrupt as u32, "{text}");
            assert_eq!(
                text,
                format!(
                    "corrupt record: main.{table}, column {column} (INTEGER), rowid {rowid}: the \
                     store holds the text {stored:?} ({} bytes), which INTEGER cannot hold",
                    stored.len()
                )
            );
            // a clone names the same table
            let copy = moraine_mat_clone(mat);
            let why = "does not deserialize (not enough data)";
            moraine_mat_misfit(
                copy,
                0,
                0,
                column.as_ptr() as *const c_char,
                column.len(),
                ty.as_ptr() as *const c_char,
                ty.len(),
                why.as_ptr() as *const c_char,
                why.len(),
                &mut err,
            );
            let (_, text) = taken(&mut err);
            assert!(
                text.contains(&format!("main.{table}, column {column}"))
                    && text.ends_with(&format!(", which {why}")),
                "{text}"
            );
            moraine_mat_free(copy);
            moraine_mat_free(mat);
            moraine_txn_rollback(txn);
            moraine_store_free(handle);
        }
        // what is stored, shortened when long
        let long = "x".repeat(1000);
        let e = misfit("main.t", "c", "BIGINT", 7, Some(&Cell::Text(long)), "");
        let text = e.to_string();
        assert!(
            text.contains(&format!("\"{}\"... (1000 bytes)", "x".repeat(64))),
            "{text}"
        );
        let e = misfit("main.t", "c", "TINYINT", 7, Some(&Cell::Int(300)), "");
        assert_eq!(
            e.to_string(),
            "corrupt record: main.t, column c (TINYINT), rowid 7: the store holds the integer \
             300, which TINYINT cannot hold"
        );
        let e = misfit(
            "main.t",
            "c",
            "UUID",
            7,
            Some(&Cell::Blob((0..40).collect())),
            "does not deserialize (boom)",
        );
        assert!(
            e.to_string().contains(&format!(
                "a serialized DuckDB value of 40 bytes ({}...), which does not deserialize (boom)",
                (0..32).map(|x| format!("{x:02x}")).collect::<String>()
            )),
            "{e}"
        );
        assert!(!e.retryable());
    }

    #[test]
    fn a_malformed_cell_is_an_error_naming_its_table_and_column() {
        let store = new_lake(&mem_url("ffi-cell"));
        let head = store.head().unwrap();
        let handle = Box::into_raw(Box::new(MoraineStore(store.clone())));
        let table = "ducklake_metadata";
        let def = moraine::catalog::fixed_table_def(M, table).unwrap();
        let ncols = def.columns.len();
        // (kept alive while cells point into it)
        let good = Cell::Text("k".into());
        unsafe {
            let mut err = no_error();
            let txn = moraine_txn_begin(handle, &mut err);
            let rows = moraine_rows_new(ncols);
            let bad = [0xff_u8, 0xfe];
            for col in 0..ncols {
                let cell = if col == 1 {
                    MoraineCell {
                        tag: TAG_TEXT,
                        i: 0,
                        f: 0.0,
                        ptr: bad.as_ptr(),
                        len: bad.len(),
                    }
                } else {
                    cell_to_c(&good)
                };
                moraine_rows_push(rows, &cell);
            }
            assert_ne!(stage_insert(txn, table, rows, &mut err), 0);
            let (kind, text) = taken(&mut err);
            assert_eq!(kind, Kind::InvalidInput as u32, "{text}");
            let column = &def.columns[1].name;
            assert!(
                text.contains(table) && text.contains(column.as_str()) && text.contains("UTF-8"),
                "{text}"
            );
            // an unknown tag too, never a NULL
            let rows = moraine_rows_new(ncols);
            for col in 0..ncols {
                let mut cell = cell_to_c(&good);
                if col == 0 {
                    cell.tag = 42;
                }
                moraine_rows_push(rows, &cell);
            }
            assert_ne!(stage_insert(txn, table, rows, &mut err), 0);
            let (_, text) = taken(&mut err);
            assert!(
                text.contains("unknown cell tag 42") && text.contains(&def.columns[0].name),
                "{text}"
            );
            // an update's cells are its SET columns: the error names the table's column
            let mat = read_rows(txn, table, false, &mut err);
            let rowid = moraine_mat_rowid(mat, 0);
            moraine_mat_free(mat);
            let rows = moraine_rows_new(1);
            let cell = MoraineCell {
                tag: TAG_TEXT,
                i: 0,
                f: 0.0,
                ptr: bad.as_ptr(),
                len: bad.len(),
            };
            moraine_rows_push(rows, &cell);
            let set = [2usize];
            let updated = moraine_txn_stage_update(
                txn,
                M.as_ptr() as *const c_char,
                M.len(),
                table.as_ptr() as *const c_char,
                table.len(),
                &rowid,
                1,
                set.as_ptr(),
                1,
                rows,
                &mut err,
            );
            assert_ne!(updated, 0);
            let (_, text) = taken(&mut err);
            assert!(
                text.contains(&format!("column {}:", def.columns[2].name)),
                "{text}"
            );
            assert_eq!(moraine_txn_commit(txn, &mut err), 0);
            assert_eq!(store.head().unwrap(), head);
            moraine_store_free(handle);
        }
    }
}
