//! The C surface the C++ layer calls and the extension entry point. cbindgen generates the C++
//! layer's header from this file (extension/include/moraine_ffi.h, `cargo xtask header`), so
//! every constant, struct and signature the C++ compiler sees is the one defined here.
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

use moraine::catalog::{ColumnDef, OnConflict, TableDef};
use moraine::cell::{Cell, Row};
use moraine::error::{Error, Kind, Result};
use moraine::scan::{Emitted, IntsOut, Op, Predicate, Scan};
use moraine::store::Store;
use moraine::txn::Transaction;

/// An error Rust hands the C++ layer, which throws it and frees it (`moraine_error_free`).
#[repr(C)]
pub struct MoraineError {
    ptr: *mut c_char,
    len: usize,
    /// A [`Kind`] code; 0 when there is no error.
    kind: u32,
    /// An [`Exception`] code; 0 when there is no error.
    exception: u32,
}

/// The DuckDB exception the C++ layer throws for an error (`MoraineError::exception`): Rust
/// chooses it ([`Exception::for_kind`]), never from the message; the C++ layer only throws it.
/// None is DuckDB's `InternalException` or `FatalException`, which end the database instance.
/// `InvalidInputException`.
pub const MORAINE_EXCEPTION_INVALID_INPUT: u32 = 1;
/// `TransactionException`.
pub const MORAINE_EXCEPTION_TRANSACTION: u32 = 2;
/// `ConstraintException`.
pub const MORAINE_EXCEPTION_CONSTRAINT: u32 = 3;
/// `CatalogException`.
pub const MORAINE_EXCEPTION_CATALOG: u32 = 4;
/// `PermissionException`.
pub const MORAINE_EXCEPTION_PERMISSION: u32 = 5;
/// `IOException`.
pub const MORAINE_EXCEPTION_IO: u32 = 6;
/// `ConnectionException` (a commit of unknown outcome).
pub const MORAINE_EXCEPTION_CONNECTION: u32 = 7;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Exception {
    InvalidInput = MORAINE_EXCEPTION_INVALID_INPUT,
    Transaction = MORAINE_EXCEPTION_TRANSACTION,
    Constraint = MORAINE_EXCEPTION_CONSTRAINT,
    Catalog = MORAINE_EXCEPTION_CATALOG,
    Permission = MORAINE_EXCEPTION_PERMISSION,
    Io = MORAINE_EXCEPTION_IO,
    Connection = MORAINE_EXCEPTION_CONNECTION,
}

impl Exception {
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

/// One value crossing the boundary: `tag` says which field holds it (`MORAINE_NULL` ...).
#[repr(C)]
pub struct MoraineCell {
    tag: u8,
    i: i64,
    f: f64,
    ptr: *const u8,
    len: usize,
}

/// The cell a value of the DuckDB type with id `type_id` (with an alias: `has_alias`) crosses
/// as: `MORAINE_INT`, `MORAINE_BOOL`, `MORAINE_FLOAT`, `MORAINE_TEXT` or, for every other type,
/// `MORAINE_BLOB` ([`moraine::duckdb_types::held`]).
#[no_mangle]
pub extern "C" fn moraine_type_tag(type_id: u8, has_alias: bool) -> u8 {
    use moraine::duckdb_types::{held, Held};
    match held(type_id, has_alias) {
        Held::Int => MORAINE_INT,
        Held::Bool => MORAINE_BOOL,
        Held::Float => MORAINE_FLOAT,
        Held::Text => MORAINE_TEXT,
        Held::Serialized => MORAINE_BLOB,
    }
}

/// Whether a non-NULL stored `cell` fits a column of the DuckDB type `type_id`: the tag that
/// type crosses as and a value it holds ([`moraine::duckdb_types::fits`]). A scan reports a
/// cell that does not as a corrupt record (`moraine_mat_misfit`).
#[no_mangle]
pub unsafe extern "C" fn moraine_cell_fits(
    type_id: u8,
    has_alias: bool,
    cell: *const MoraineCell,
) -> bool {
    use moraine::duckdb_types::{fits, Held};
    let cell = &*cell;
    let held = match cell.tag {
        MORAINE_INT => Held::Int,
        MORAINE_BOOL => Held::Bool,
        MORAINE_FLOAT => Held::Float,
        MORAINE_TEXT => Held::Text,
        MORAINE_BLOB => Held::Serialized,
        _ => return false,
    };
    fits(type_id, has_alias, held, cell.i, cell.f)
}

/// DuckDB's `LogicalTypeId`s that [`moraine::duckdb_types`] names, as literals the C++ layer
/// checks against DuckDB's own enum at compile time (`moraine_cells.cpp`); the test below
/// checks them against the core's.
#[allow(dead_code)] // (for the header only)
pub mod type_ids {
    pub const MORAINE_TYPE_BOOLEAN: u8 = 10;
    pub const MORAINE_TYPE_TINYINT: u8 = 11;
    pub const MORAINE_TYPE_SMALLINT: u8 = 12;
    pub const MORAINE_TYPE_INTEGER: u8 = 13;
    pub const MORAINE_TYPE_BIGINT: u8 = 14;
    pub const MORAINE_TYPE_FLOAT: u8 = 22;
    pub const MORAINE_TYPE_DOUBLE: u8 = 23;
    pub const MORAINE_TYPE_VARCHAR: u8 = 25;
    pub const MORAINE_TYPE_UTINYINT: u8 = 28;
    pub const MORAINE_TYPE_USMALLINT: u8 = 29;
    pub const MORAINE_TYPE_UINTEGER: u8 = 30;
    pub const MORAINE_TYPE_TIMESTAMP_TZ: u8 = 32;
    pub const MORAINE_TYPE_UUID: u8 = 54;
    pub const MORAINE_TYPE_BLOB: u8 = 26;
    pub const MORAINE_TYPE_DATE: u8 = 15;
    pub const MORAINE_TYPE_TIME: u8 = 16;
    pub const MORAINE_TYPE_TIMESTAMP: u8 = 19;
}

/// DuckDB's `OnCreateConflict` values, which the C++ layer hands over as they are and checks
/// against DuckDB's own enum at compile time (`moraine_schema_entry.cpp`).
pub const MORAINE_ON_CONFLICT_ERROR: u8 = 0;
pub const MORAINE_ON_CONFLICT_IGNORE: u8 = 1;
pub const MORAINE_ON_CONFLICT_REPLACE: u8 = 2;

/// The [`OnConflict`] of DuckDB's `OnCreateConflict` value `v`.
fn on_conflict(v: u8) -> Result<OnConflict> {
    match v {
        MORAINE_ON_CONFLICT_ERROR => Ok(OnConflict::Error),
        MORAINE_ON_CONFLICT_IGNORE => Ok(OnConflict::Ignore),
        MORAINE_ON_CONFLICT_REPLACE => Ok(OnConflict::Replace),
        other => Err(Error::InvalidInput(format!(
            "CREATE TABLE with conflict action {other} (DuckDB's OnCreateConflict) is not supported"
        ))),
    }
}

/// One column of a table being created.
#[repr(C)]
pub struct MoraineColumnIn {
    name: *const c_char,
    name_len: usize,
    /// DuckDB's `LogicalType::ToString()`.
    type_name: *const c_char,
    type_name_len: usize,
    /// The `LogicalType`, serialized by the C++ layer.
    type_blob: *const u8,
    type_blob_len: usize,
}

/// A cell's tag (`MoraineCell::tag`): NULL.
pub const MORAINE_NULL: u8 = 0;
/// `i`: any integer that fits an `i64`.
pub const MORAINE_INT: u8 = 1;
/// `i`: 0 or 1.
pub const MORAINE_BOOL: u8 = 2;
/// `f`.
pub const MORAINE_FLOAT: u8 = 3;
/// `ptr`/`len`: UTF-8 text.
pub const MORAINE_TEXT: u8 = 4;
/// `ptr`/`len`: a DuckDB `Value` the C++ layer serialized, stored opaquely.
pub const MORAINE_BLOB: u8 = 5;

/// The kinds of an operator view's field (`MoraineFieldKind`).
pub const MORAINE_FIELD_TEXT: u32 = 0;
pub const MORAINE_FIELD_BIGINT: u32 = 1;
pub const MORAINE_FIELD_TIME: u32 = 2;

pub struct MoraineStore(Arc<Store>);
pub struct MoraineTxn(Mutex<Transaction>);
/// A scan of one table ([`Scan`]), owned by DuckDB's bind data.
pub struct MoraineScan(Scan);
/// The rows one scan emits ([`Emitted`]).
pub struct MoraineMat(Emitted);
pub struct MoraineRows {
    ncols: usize,
    cells: Vec<Cell>,
    /// The first cell pushed that was not a well-formed cell: its position and what was wrong.
    malformed: Option<(usize, Error)>,
}

pub type NameCb = extern "C" fn(ud: *mut c_void, name: *const c_char, len: usize);
pub type ColumnCb = extern "C" fn(
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
        .map_err(|_| Error::InvalidInput("a name or argument is not valid UTF-8".into()))
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
        MORAINE_NULL => Cell::Null,
        MORAINE_INT => Cell::Int(c.i),
        MORAINE_BOOL => Cell::Bool(c.i != 0),
        MORAINE_FLOAT => Cell::Float(c.f),
        MORAINE_TEXT => Cell::Text(
            std::str::from_utf8(slice(c.ptr, c.len))
                .map_err(|_| Error::InvalidInput("text cell is not valid UTF-8".into()))?
                .to_string(),
        ),
        MORAINE_BLOB => Cell::Blob(slice(c.ptr, c.len).to_vec()),
        other => return Err(Error::InvalidInput(format!("unknown cell tag {other}"))),
    })
}

fn cell_to_c(cell: &Cell) -> MoraineCell {
    let mut out = MoraineCell {
        tag: MORAINE_NULL,
        i: 0,
        f: 0.0,
        ptr: std::ptr::null(),
        len: 0,
    };
    match cell {
        Cell::Null => {}
        Cell::Int(i) => {
            out.tag = MORAINE_INT;
            out.i = *i;
        }
        Cell::Bool(b) => {
            out.tag = MORAINE_BOOL;
            out.i = *b as i64;
        }
        Cell::Float(f) => {
            out.tag = MORAINE_FLOAT;
            out.f = *f;
        }
        Cell::Text(s) => {
            out.tag = MORAINE_TEXT;
            out.ptr = s.as_ptr();
            out.len = s.len();
        }
        Cell::Blob(b) => {
            out.tag = MORAINE_BLOB;
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

/// Opens the store at `url` for an ATTACH with `options`: the s3 secret's fields (`s3.*`) and
/// the settings it read (`setting.<name>`, [`moraine::settings::store_options`]).
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
        let mut opts: Vec<(String, String)> = Vec::with_capacity(n_options);
        for i in 0..n_options {
            let o = &*options.add(i);
            opts.push((
                text(o.key, o.key_len)?.to_string(),
                text(o.value, o.value_len)?.to_string(),
            ));
        }
        let opts = moraine::settings::store_options(opts);
        Ok(Box::into_raw(Box::new(MoraineStore(Store::open_with(
            url,
            read_only != 0,
            &opts,
        )?))))
    })
    .unwrap_or(std::ptr::null_mut())
}

/// What an ATTACH opens ([`moraine::attach::Plan`]).
#[repr(C)]
pub struct MoraineAttachPlan {
    pub s3: bool,
    pub read_only: bool,
    pub read_write_again: bool,
}

/// Decides what an ATTACH opens ([`moraine::attach::plan`]) from what DuckDB knows of it: its
/// `path`, the `options` DuckDB left to the storage extension, the names of all its options
/// (`named`, values ignored), whether DuckDB set it `read_only`, and whether DuckDB's own
/// access mode is automatic. Writes the plan to `out` and calls `cb(ud, "url", url, 0)`, then,
/// when the ATTACH named a secret, `cb(ud, "secret", name, 0)`; nonzero with `err` set when the
/// ATTACH is refused.
#[no_mangle]
pub unsafe extern "C" fn moraine_attach_plan(
    path: *const c_char,
    path_len: usize,
    options: *const MoraineOption,
    n_options: usize,
    named: *const MoraineOption,
    n_named: usize,
    read_only: bool,
    duckdb_automatic: bool,
    out: *mut MoraineAttachPlan,
    ud: *mut c_void,
    cb: TextRowCb,
    err: *mut MoraineError,
) -> i32 {
    let plan = guard(err, || {
        let pairs = |p: *const MoraineOption, n: usize| -> Result<Vec<(String, String)>> {
            slice(p, n)
                .iter()
                .map(|o| {
                    Ok((
                        text(o.key, o.key_len)?.to_string(),
                        text(o.value, o.value_len)?.to_string(),
                    ))
                })
                .collect()
        };
        moraine::attach::plan(&moraine::attach::Facts {
            path: text(path, path_len)?.to_string(),
            options: pairs(options, n_options)?,
            named: pairs(named, n_named)?.into_iter().map(|(n, _)| n).collect(),
            read_only,
            duckdb_automatic,
        })
    });
    let Some(plan) = plan else {
        return 1;
    };
    *out = MoraineAttachPlan {
        s3: plan.s3,
        read_only: plan.read_only,
        read_write_again: plan.read_write_again,
    };
    let mut texts = vec![("url".to_string(), plan.url, 0)];
    texts.extend(plan.secret.map(|name| ("secret".to_string(), name, 0)));
    text_rows(Some(texts), ud, cb)
}

#[no_mangle]
pub unsafe extern "C" fn moraine_store_free(store: *mut MoraineStore) {
    if !store.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(store))));
    }
}

/// Two texts and an integer (`moraine_text_row_cb`): a line of the ATTACH plan
/// ([`moraine_attach_plan`]) or of EXPLAIN ([`moraine_mat_explain`]).
pub type TextRowCb = extern "C" fn(
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

/// One field of an operator view: row `row`'s column `name`, of kind `kind`
/// (`MORAINE_FIELD_*`: `text`, or `i`), NULL when `is_null`. Called column by column, row by row.
pub type FieldCb = extern "C" fn(
    ud: *mut c_void,
    row: usize,
    name: *const c_char,
    name_len: usize,
    kind: u32,
    i: i64,
    text: *const c_char,
    text_len: usize,
    is_null: bool,
);

/// Hands each row's fields to `cb`, in order.
fn emit_rows(rows: Vec<moraine::views::Row>, ud: *mut c_void, cb: FieldCb) {
    use moraine::status::Field;
    for (row, fields) in rows.into_iter().enumerate() {
        for (name, field) in fields {
            let (kind, i, text, null) = match &field {
                Field::Text(t) => (
                    MORAINE_FIELD_TEXT,
                    0,
                    t.as_deref().unwrap_or(""),
                    t.is_none(),
                ),
                Field::Int(v) => (MORAINE_FIELD_BIGINT, v.unwrap_or(0), "", v.is_none()),
                Field::Time(v) => (MORAINE_FIELD_TIME, v.unwrap_or(0), "", v.is_none()),
            };
            let (name_ptr, text_ptr) = (
                name.as_ptr() as *const c_char,
                text.as_ptr() as *const c_char,
            );
            cb(
                ud,
                row,
                name_ptr,
                name.len(),
                kind,
                i,
                text_ptr,
                text.len(),
                null,
            );
        }
    }
}

/// The columns of the operator view the table function `view` is, as one row whose values mean
/// nothing but their kind ([`moraine::views::View::columns`]); nonzero with `err` set for a
/// name that is no view.
#[no_mangle]
pub unsafe extern "C" fn moraine_view_columns(
    view: *const c_char,
    view_len: usize,
    ud: *mut c_void,
    cb: FieldCb,
    err: *mut MoraineError,
) -> i32 {
    let columns = guard(err, || {
        Ok(moraine::views::View::named(text(view, view_len)?)?.columns())
    });
    let Some(columns) = columns else { return 1 };
    emit_rows(vec![columns], ud, cb);
    0
}

/// How many text arguments the operator view `view` takes after the lake's name
/// ([`moraine::views::View::extra_arguments`]); -1 for a name that is not a view's.
#[no_mangle]
pub unsafe extern "C" fn moraine_view_arguments(view: *const c_char, view_len: usize) -> i32 {
    match text(view, view_len).and_then(moraine::views::View::named) {
        Ok(view) => view.extra_arguments() as i32,
        Err(_) => -1,
    }
}

/// The rows of the operator view `view` of `store` now ([`moraine::views::View::rows`];
/// `argument`: its text argument after the lake's name, empty when it takes none): 0, 1 with
/// `err` set when they cannot be read, or 2 for a view that makes its rows at its scan
/// (`moraine_reclaim`: [`moraine_store_reclaim`]).
#[no_mangle]
pub unsafe extern "C" fn moraine_view_rows(
    store: *mut MoraineStore,
    view: *const c_char,
    view_len: usize,
    argument: *const c_char,
    argument_len: usize,
    ud: *mut c_void,
    cb: FieldCb,
    err: *mut MoraineError,
) -> i32 {
    let store = &*store;
    let rows = guard(err, || {
        moraine::views::View::named(text(view, view_len)?)?
            .rows(&store.0, text(argument, argument_len)?)
    });
    match rows {
        None => 1,
        Some(None) => 2,
        Some(Some(rows)) => {
            emit_rows(rows, ud, cb);
            0
        }
    }
}

/// `moraine_reclaim`: reclaims the store's space now and hands over the one row saying what
/// went. `explicit`: the call runs in an explicit transaction; `read_lake`: the caller's
/// transaction has a transaction of the lake already; `rebound`: the lake's name was detached
/// and attached again since the bind ([`moraine::store::Caller`]).
#[no_mangle]
pub unsafe extern "C" fn moraine_store_reclaim(
    store: *mut MoraineStore,
    explicit: bool,
    read_lake: bool,
    rebound: bool,
    began_micros: i64,
    ud: *mut c_void,
    cb: FieldCb,
    err: *mut MoraineError,
) -> i32 {
    let caller = moraine::store::Caller {
        explicit,
        read_lake,
        rebound,
        began: Some(began_micros),
    };
    let store = &*store;
    let Some(row) = guard(err, || Ok(store.0.reclaim_for(caller)?.fields())) else {
        return 1;
    };
    emit_rows(vec![row], ud, cb);
    0
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
    conflict: u8,
    created: *mut i32,
    err: *mut MoraineError,
) -> i32 {
    status(guard(err, || {
        let conflict = on_conflict(conflict)?;
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
        let made = lock(&*txn)?.create_table_on_conflict(def, conflict)?;
        *created = i32::from(made);
        Ok(())
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

/// One predicate of [`moraine_scan_push`] ([`moraine::scan::Predicate`]).
#[repr(C)]
pub struct MorainePredicate {
    pub filter: usize,
    pub clause: usize,
    pub column: usize,
    pub op: u32,
    pub value: MoraineCell,
}

/// The comparisons of a predicate (`MoraineOp`).
pub const MORAINE_OP_EQ: u32 = 0;
pub const MORAINE_OP_LT: u32 = 1;
pub const MORAINE_OP_LE: u32 = 2;
pub const MORAINE_OP_GT: u32 = 3;
pub const MORAINE_OP_GE: u32 = 4;
pub const MORAINE_OP_IS_NULL: u32 = 5;

fn op_from_c(op: u32) -> Option<Op> {
    Some(match op {
        MORAINE_OP_EQ => Op::Eq,
        MORAINE_OP_LT => Op::Lt,
        MORAINE_OP_LE => Op::Le,
        MORAINE_OP_GT => Op::Gt,
        MORAINE_OP_GE => Op::Ge,
        MORAINE_OP_IS_NULL => Op::IsNull,
        _ => return None,
    })
}

#[no_mangle]
pub unsafe extern "C" fn moraine_scan_new(
    schema: *const c_char,
    schema_len: usize,
    name: *const c_char,
    name_len: usize,
) -> *mut MoraineScan {
    let schema = String::from_utf8_lossy(slice(schema as *const u8, schema_len));
    let name = String::from_utf8_lossy(slice(name as *const u8, name_len));
    Box::into_raw(Box::new(MoraineScan(Scan::new(&schema, &name))))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_scan_free(scan: *mut MoraineScan) {
    if !scan.is_null() {
        drop(Box::from_raw(scan));
    }
}

/// DuckDB's filter pushdown ([`Scan::push`]): sets `applied[f]` to 1 for each of the
/// `n_filters` filters the scan applies exactly (DuckDB drops it), else 0; returns 1 when the
/// scan emits no row (DuckDB adds a constant FALSE filter), else 0. A predicate that does not
/// unmarshal leaves its filter with DuckDB.
#[no_mangle]
pub unsafe extern "C" fn moraine_scan_push(
    scan: *const MoraineScan,
    txn: *mut MoraineTxn,
    predicates: *const MorainePredicate,
    n: usize,
    n_filters: usize,
    applied: *mut u8,
) -> i32 {
    if n_filters == 0 {
        return 0;
    }
    let applied = std::slice::from_raw_parts_mut(applied, n_filters);
    applied.fill(0);
    let raw = slice(predicates, n);
    let pushed = quiet("moraine_scan_push", None, || {
        // a filter with a predicate that does not unmarshal is not pushed at all
        let mut broken = Vec::new();
        let mut predicates = Vec::with_capacity(raw.len());
        for p in raw {
            match (op_from_c(p.op), cell_from_c(&p.value)) {
                (Some(op), Ok(value)) => predicates.push(Predicate {
                    filter: p.filter,
                    clause: p.clause,
                    column: p.column,
                    op,
                    value,
                }),
                _ => broken.push(p.filter),
            }
        }
        predicates.retain(|p| !broken.contains(&p.filter));
        let mut txn = lock(&*txn).ok()?;
        Some((*scan).0.push(&mut txn, &predicates, n_filters))
    });
    let Some(pushed) = pushed else {
        return 0;
    };
    for (out, a) in applied.iter_mut().zip(pushed.applied) {
        *out = u8::from(a);
    }
    i32::from(pushed.empty)
}

/// The rows the scan emits in `txn` ([`Scan::rows`]); NULL with `err` set when they cannot be
/// read.
#[no_mangle]
pub unsafe extern "C" fn moraine_scan_rows(
    scan: *const MoraineScan,
    txn: *mut MoraineTxn,
    err: *mut MoraineError,
) -> *mut MoraineMat {
    guard(err, || {
        let rows = (*scan).0.rows(&mut *lock(&*txn)?)?;
        Ok(Box::into_raw(Box::new(MoraineMat(rows))))
    })
    .unwrap_or(std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_len(mat: *const MoraineMat) -> usize {
    quiet("moraine_mat_len", 0, || (*mat).0.len())
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_rowid(mat: *const MoraineMat, index: usize) -> i64 {
    quiet("moraine_mat_rowid", -1, || (*mat).0.rowid(index))
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
        cell_to_c(mat.0.cell(row, col).unwrap_or(&Cell::Null))
    });
}

/// Rows `start..start + count` of column `col` into `values` (`width` 8: `int64_t`s, 4:
/// `int32_t`s), `valid[i]` 0 for a NULL, and into `nulls` how many are NULL ([`Emitted::ints`];
/// `blob_type` 0 for integer cells, else the DuckDB type id of serialized ones). False, with
/// nothing to rely on written, when a cell is of another kind or does not fit (the caller then
/// reads cell by cell).
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_ints(
    mat: *const MoraineMat,
    start: usize,
    count: usize,
    col: usize,
    blob_type: u8,
    width: u8,
    values: *mut c_void,
    valid: *mut u8,
    nulls: *mut usize,
) -> bool {
    *nulls = 0;
    if count == 0 {
        return true;
    }
    let out = match width {
        8 => IntsOut::I64(std::slice::from_raw_parts_mut(values as *mut i64, count)),
        4 => IntsOut::I32(std::slice::from_raw_parts_mut(values as *mut i32, count)),
        _ => return false,
    };
    let valid = std::slice::from_raw_parts_mut(valid, count);
    // (on a panic: false, and the caller reads cell by cell)
    quiet("moraine_mat_ints", false, || {
        (*mat)
            .0
            .ints(start, col, blob_type, out, valid)
            .map(|n| *nulls = n)
            .is_some()
    })
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

/// The bounds of integer column `col` over the rows the scan emits. Returns false, writing
/// nothing to rely on, when a cell there is not an integer or NULL.
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_int_stats(
    mat: *const MoraineMat,
    col: usize,
    out: *mut MoraineIntStats,
) -> bool {
    let Some(bounds) = quiet("moraine_mat_int_stats", None, || (*mat).0.int_bounds(col)) else {
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

/// What EXPLAIN ANALYZE shows of the scan ([`Emitted::explain`]): one (name, value) per call.
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_explain(
    mat: *const MoraineMat,
    ud: *mut c_void,
    cb: TextRowCb,
) {
    let lines = quiet("moraine_mat_explain", Vec::new(), || (*mat).0.explain());
    text_rows(
        Some(lines.into_iter().map(|(n, v)| (n.into(), v, 0)).collect()),
        ud,
        cb,
    );
}

/// Sets `err` to the error for the cell at column `col` of the `index`-th row of `mat`, which
/// the C++ layer could not write into its column (`column`, of DuckDB type `column_type`;
/// `why`, possibly empty, says what failed): [`Emitted::misfit`].
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
        mat.0.misfit(
            index,
            col,
            &lossy(column, column_len),
            &lossy(column_type, column_type_len),
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
/// that is not one of its settings ([`moraine::settings`]).
#[no_mangle]
pub unsafe extern "C" fn moraine_setting_default(name: *const c_char) -> *const c_char {
    static DEFAULTS: OnceLock<Vec<(&'static str, std::ffi::CString)>> = OnceLock::new();
    let defaults = DEFAULTS.get_or_init(|| {
        moraine::settings::all()
            .into_iter()
            .map(|s| {
                (
                    s.name,
                    std::ffi::CString::new(s.default).expect("no NUL in it"),
                )
            })
            .collect()
    });
    let name = std::ffi::CStr::from_ptr(name).to_bytes();
    defaults
        .iter()
        .find(|(n, _)| n.as_bytes() == name)
        .map_or(std::ptr::null(), |(_, d)| d.as_ptr())
}

/// One of moraine's DuckDB settings ([`moraine::settings::Setting`]), for registration.
#[repr(C)]
pub struct MoraineSetting {
    pub name: *const c_char,
    pub name_len: usize,
    pub description: *const c_char,
    pub description_len: usize,
    pub default_value: *const c_char,
    pub default_len: usize,
    /// `MoraineSettingType`
    pub ty: u32,
    /// `MoraineOnSet`
    pub on_set: u32,
}

/// A setting's DuckDB type (`MoraineSettingType`).
pub const MORAINE_SETTING_INTERVAL: u32 = 0;
pub const MORAINE_SETTING_TEXT: u32 = 1;
/// What a `SET` does besides storing the value (`MoraineOnSet`).
pub const MORAINE_ON_SET_NOTHING: u32 = 0;
pub const MORAINE_ON_SET_CHECK_MAX_COMMIT_SIZE: u32 = 1;
pub const MORAINE_ON_SET_SET_LOG_LEVEL: u32 = 2;

pub type SettingCb = extern "C" fn(ud: *mut c_void, setting: *const MoraineSetting);

/// Calls `cb` once per setting, in order ([`moraine::settings::all`]).
#[no_mangle]
pub unsafe extern "C" fn moraine_settings(ud: *mut c_void, cb: SettingCb) {
    use moraine::settings::{OnSet, Type};
    for s in quiet("moraine_settings", Vec::new(), moraine::settings::all) {
        let setting = MoraineSetting {
            name: s.name.as_ptr() as *const c_char,
            name_len: s.name.len(),
            description: s.description.as_ptr() as *const c_char,
            description_len: s.description.len(),
            default_value: s.default.as_ptr() as *const c_char,
            default_len: s.default.len(),
            ty: match s.ty {
                Type::Interval => MORAINE_SETTING_INTERVAL,
                Type::Text => MORAINE_SETTING_TEXT,
            },
            on_set: match s.on_set {
                OnSet::Nothing => MORAINE_ON_SET_NOTHING,
                OnSet::CheckMaxCommitSize => MORAINE_ON_SET_CHECK_MAX_COMMIT_SIZE,
                OnSet::SetLogLevel => MORAINE_ON_SET_SET_LOG_LEVEL,
            },
        };
        cb(ud, &setting);
    }
}

/// The names of the DuckDB settings an ATTACH reads ([`moraine::settings::read_at_attach`]),
/// for an `s3://` store when `s3`; the C++ layer passes each value to `moraine_store_open` as
/// the option `setting.<name>` (an INTERVAL as whole microseconds).
#[no_mangle]
pub unsafe extern "C" fn moraine_attach_settings(s3: bool, ud: *mut c_void, cb: NameCb) {
    let names = quiet("moraine_attach_settings", Vec::new(), || {
        moraine::settings::read_at_attach(s3)
    });
    for name in names {
        cb(ud, name.as_ptr() as *const c_char, name.len());
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
mod tests {
    use super::*;

    #[test]
    fn the_type_ids_the_header_carries_are_the_core_s() {
        use moraine::duckdb_types as t;
        use type_ids::*;
        let pairs = [
            (MORAINE_TYPE_BOOLEAN, t::BOOLEAN),
            (MORAINE_TYPE_TINYINT, t::TINYINT),
            (MORAINE_TYPE_SMALLINT, t::SMALLINT),
            (MORAINE_TYPE_INTEGER, t::INTEGER),
            (MORAINE_TYPE_BIGINT, t::BIGINT),
            (MORAINE_TYPE_FLOAT, t::FLOAT),
            (MORAINE_TYPE_DOUBLE, t::DOUBLE),
            (MORAINE_TYPE_VARCHAR, t::VARCHAR),
            (MORAINE_TYPE_UTINYINT, t::UTINYINT),
            (MORAINE_TYPE_USMALLINT, t::USMALLINT),
            (MORAINE_TYPE_UINTEGER, t::UINTEGER),
            (MORAINE_TYPE_TIMESTAMP_TZ, t::TIMESTAMP_TZ),
            (MORAINE_TYPE_UUID, t::UUID),
            (MORAINE_TYPE_BLOB, t::BLOB),
            (MORAINE_TYPE_DATE, t::DATE),
            (MORAINE_TYPE_TIME, t::TIME),
            (MORAINE_TYPE_TIMESTAMP, t::TIMESTAMP),
        ];
        for (header, core) in pairs {
            assert_eq!(header, core);
        }
    }
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
        // (a healthy store settles it at the next statement: see src/store/tests.rs)
        store.begin().head_snapshot(M).unwrap();
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
        let text = store
            .outcome_unknown("a panic in moraine (boom)")
            .duckdb_message();
        assert!(
            text.contains("may or may not have been applied")
                && text.contains("the next statement settles it"),
            "{text}"
        );
    }

    /// A scan through the C surface: predicates unmarshalled (a filter with an unknown
    /// operator stays with DuckDB), the rows handed out, 32-bit vectors, EXPLAIN's lines and a
    /// misfit reported as a corrupt record through DuckDB's IOException. The decisions
    /// themselves are tested in the core (src/scan/tests.rs).
    /// A scan of `table` in the main lake.
    unsafe fn scan_of(table: &str) -> *mut MoraineScan {
        moraine_scan_new(
            M.as_ptr() as *const c_char,
            M.len(),
            table.as_ptr() as *const c_char,
            table.len(),
        )
    }

    #[test]
    fn a_scan_marshals_its_predicates_and_rows() {
        let store = new_lake(&mem_url("ffi-scan"));
        let handle = Box::into_raw(Box::new(MoraineStore(store)));
        let table = "ducklake_snapshot";
        let def = moraine::catalog::fixed_table_def(M, table).unwrap();
        let id = def.column_index("snapshot_id").unwrap();
        unsafe {
            let mut err = no_error();
            let txn = moraine_txn_begin(handle, &mut err);
            let scan = scan_of(table);
            let predicate = |filter, op, v| MorainePredicate {
                filter,
                clause: 0,
                column: id,
                op,
                value: cell_to_c(&Cell::Int(v)),
            };
            let predicates = [predicate(0, MORAINE_OP_EQ, 0), predicate(1, 99, 0)];
            let mut applied = [7_u8; 2];
            let empty =
                moraine_scan_push(scan, txn, predicates.as_ptr(), 2, 2, applied.as_mut_ptr());
            assert_eq!((empty, applied), (0, [1, 0]));
            let none = [predicate(2, MORAINE_OP_GT, 5)];
            let mut applied = [7_u8; 3];
            let empty = moraine_scan_push(scan, txn, none.as_ptr(), 1, 3, applied.as_mut_ptr());
            assert_eq!((empty, applied), (1, [0, 0, 1]));
            let mat = moraine_scan_rows(scan, txn, &mut err);
            assert!(!mat.is_null());
            assert_eq!(moraine_mat_len(mat), 0);
            moraine_mat_free(mat);

            let all = scan_of(table);
            let mat = moraine_scan_rows(all, txn, &mut err);
            assert_eq!(moraine_mat_len(mat), 1);
            let (mut values, mut valid, mut nulls) = ([9_i32; 1], [9_u8; 1], 9_usize);
            assert!(moraine_mat_ints(
                mat,
                0,
                1,
                id,
                0,
                4,
                values.as_mut_ptr() as *mut c_void,
                valid.as_mut_ptr(),
                &mut nulls
            ));
            assert_eq!((values, valid, nulls), ([0], [1], 0));
            assert!(!moraine_mat_ints(
                mat,
                0,
                1,
                id,
                0,
                3,
                values.as_mut_ptr() as *mut c_void,
                valid.as_mut_ptr(),
                &mut nulls
            ));
            extern "C" fn line(
                ud: *mut c_void,
                a: *const c_char,
                a_len: usize,
                b: *const c_char,
                b_len: usize,
                _: i64,
            ) {
                let lines = unsafe { &mut *(ud as *mut Vec<String>) };
                let text = |p, n| unsafe {
                    String::from_utf8_lossy(slice(p as *const u8, n)).into_owned()
                };
                lines.push(format!("{}={}", text(a, a_len), text(b, b_len)));
            }
            let mut lines = Vec::<String>::new();
            moraine_mat_explain(mat, &mut lines as *mut _ as *mut c_void, line);
            assert_eq!(
                lines,
                ["Table=ducklake_snapshot", "History read=yes", "Rows=1"]
            );
            let (column, ty) = ("snapshot_id", "TINYINT");
            moraine_mat_misfit(
                mat,
                0,
                id,
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
            assert!(
                text.starts_with(
                    "corrupt record: main.ducklake_snapshot, column snapshot_id (TINYINT), rowid "
                ),
                "{text}"
            );
            moraine_mat_free(mat);
            moraine_scan_free(all);
            moraine_scan_free(scan);
            moraine_txn_rollback(txn);
            moraine_store_free(handle);
        }
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
                        tag: MORAINE_TEXT,
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
            let scan = scan_of(table);
            let mat = moraine_scan_rows(scan, txn, &mut err);
            assert!(!mat.is_null());
            let rowid = moraine_mat_rowid(mat, 0);
            moraine_mat_free(mat);
            moraine_scan_free(scan);
            let rows = moraine_rows_new(1);
            let cell = MoraineCell {
                tag: MORAINE_TEXT,
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
