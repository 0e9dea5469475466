//! The C surface the C++ layer calls (cpp/moraine_ffi.h) and the extension entry point.
//!
//! Everything here only converts between C shapes and the core's types; no catalog logic.
//! No Rust panic and no C++ exception crosses this boundary: every export catches panics and
//! reports them as errors, and the C++ callbacks we invoke only copy bytes.

use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use crate::catalog::{ColumnDef, TableDef};
use crate::cell::{Cell, Row};
use crate::error::{Error, Result};
use crate::store::Store;
use crate::txn::{Materialized, Transaction};

#[repr(C)]
pub struct MoraineError {
    ptr: *mut c_char,
    len: usize,
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

pub struct MoraineStore(Arc<Store>);
pub struct MoraineTxn(Mutex<Transaction>);
/// A materialization as one scan emits it: all its rows, or the positions a pushed-down filter
/// selected (ascending), which keep their rowids.
pub struct MoraineMat {
    mat: Arc<Materialized>,
    selection: Option<Vec<u32>>,
}

impl MoraineMat {
    /// Keep only the rows at `chosen` (ascending) of those selected so far; `None` keeps them
    /// all.
    fn narrow(&mut self, chosen: Option<Vec<u32>>) {
        let Some(chosen) = chosen else {
            return;
        };
        self.selection = Some(match self.selection.take() {
            None => chosen,
            Some(before) => {
                // both ascending: merge
                let (mut out, mut j) = (Vec::new(), 0);
                for p in before {
                    while j < chosen.len() && chosen[j] < p {
                        j += 1;
                    }
                    if j < chosen.len() && chosen[j] == p {
                        out.push(p);
                    }
                }
                out
            }
        });
    }

    /// The cell at column `col` of the `index`-th selected row; `None` past the end or the row.
    fn cell(&self, index: usize, col: usize) -> Option<&Cell> {
        self.mat
            .rows
            .get(self.position(index))
            .and_then(|r| r.get(col))
    }

    fn position(&self, index: usize) -> usize {
        match &self.selection {
            Some(sel) => sel.get(index).map_or(usize::MAX, |&p| p as usize),
            None => index,
        }
    }
}
pub struct MoraineRows {
    ncols: usize,
    cells: Vec<Cell>,
}

type NameCb = extern "C" fn(ud: *mut c_void, name: *const c_char, len: usize);
type ColumnCb = extern "C" fn(
    ud: *mut c_void,
    name: *const c_char,
    len: usize,
    blob: *const u8,
    blob_len: usize,
);

fn set_error(err: *mut MoraineError, message: String) {
    if err.is_null() {
        return;
    }
    let bytes = message.into_bytes().into_boxed_slice();
    let len = bytes.len();
    let ptr = Box::into_raw(bytes) as *mut c_char;
    unsafe { *err = MoraineError { ptr, len } };
}

/// Runs `f`, turning an error or a panic into `*err`.
fn guard<T>(err: *mut MoraineError, f: impl FnOnce() -> Result<T>) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Some(value),
        Ok(Err(e)) => {
            set_error(err, e.to_string());
            None
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".to_string());
            set_error(err, format!("moraine internal error: {what}"));
            None
        }
    }
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

unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
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
            std::str::from_utf8(bytes(c.ptr, c.len))
                .map_err(|_| Error::InvalidInput("text cell is not valid UTF-8".into()))?
                .to_string(),
        ),
        TAG_BLOB => Cell::Blob(bytes(c.ptr, c.len).to_vec()),
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

fn lock(txn: &MoraineTxn) -> std::sync::MutexGuard<'_, Transaction> {
    txn.0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
    let url = store.0.url().to_string();
    cb(ud, url.as_ptr() as *const c_char, url.len());
}

type KeyspaceCb = extern "C" fn(
    ud: *mut c_void,
    keyspace: *const c_char,
    len: usize,
    kind: *const c_char,
    kind_len: usize,
    keys: u64,
);

#[no_mangle]
pub unsafe extern "C" fn moraine_store_keyspace(
    store: *mut MoraineStore,
    ud: *mut c_void,
    cb: KeyspaceCb,
    err: *mut MoraineError,
) -> i32 {
    let store = &*store;
    match guard(err, || store.0.keyspace_counts()) {
        Some(counts) => {
            for (keyspace, kind, keys) in counts {
                cb(
                    ud,
                    keyspace.as_ptr() as *const c_char,
                    keyspace.len(),
                    kind.as_ptr() as *const c_char,
                    kind.len(),
                    keys,
                );
            }
            0
        }
        None => 1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_begin(store: *mut MoraineStore) -> *mut MoraineTxn {
    let store = &*store;
    Box::into_raw(Box::new(MoraineTxn(Mutex::new(store.0.begin()))))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_txn_commit(txn: *mut MoraineTxn, err: *mut MoraineError) -> i32 {
    let txn = Box::from_raw(txn);
    status(guard(err, || {
        let inner = txn
            .0
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        inner.commit()
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
    let names = guard(err, || lock(&*txn).schemas());
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
        lock(&*txn).create_schema(text(name, len)?, if_not_exists != 0)
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
        lock(&*txn).drop_schema(text(name, len)?, if_exists != 0)
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
    let tables = guard(err, || lock(&*txn).tables(text(schema, schema_len)?));
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
        lock(&*txn).table(text(schema, schema_len)?, text(name, name_len)?)
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
        let columns = if ncolumns == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(columns, ncolumns)
        };
        let columns = columns
            .iter()
            .map(|c| {
                Ok(ColumnDef {
                    name: text(c.name, c.name_len)?.to_string(),
                    type_name: text(c.type_name, c.type_name_len)?.to_string(),
                    type_blob: bytes(c.type_blob, c.type_blob_len).to_vec(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let def = TableDef {
            schema: text(schema, schema_len)?.to_string(),
            name: text(name, name_len)?.to_string(),
            columns,
        };
        lock(&*txn).create_table(def)
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
        lock(&*txn).drop_table(text(schema, schema_len)?, text(name, name_len)?)
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
    match guard(err, || lock(&*txn).head_snapshot(text(lake, lake_len)?)) {
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
        let mat = lock(&*txn).rows(
            text(schema, schema_len)?,
            text(name, name_len)?,
            need_history != 0,
        )?;
        Ok(Box::into_raw(Box::new(MoraineMat {
            mat,
            selection: None,
        })))
    })
    .unwrap_or(std::ptr::null_mut())
}

/// Narrow a scan to the rows whose `column` holds one of `values` (a conjunct of the query's
/// filter: DuckDB still applies the filter itself above the scan, so this only has to keep every
/// row that can pass). Repeated calls intersect. Served from the rows' index, not a walk.
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_select(
    mat: *mut MoraineMat,
    column: usize,
    values: *const i64,
    count: usize,
) {
    let mat = &mut *mat;
    let values = if count == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(values, count)
    };
    let chosen = mat.mat.rows.0.positions(column, values);
    mat.narrow(chosen);
}

/// Narrow a scan to the rows whose integer `column` holds a value in `lo..=hi` (a conjunct of
/// the query's filter, which DuckDB still applies). Intersects with earlier selections.
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_select_range(
    mat: *mut MoraineMat,
    column: usize,
    lo: i64,
    hi: i64,
) {
    let mat = &mut *mat;
    let chosen = mat.mat.rows.0.positions_between(column, lo, hi);
    mat.narrow(chosen);
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_len(mat: *const MoraineMat) -> usize {
    let mat = &*mat;
    match &mat.selection {
        Some(sel) => sel.len(),
        None => mat.mat.rows.len(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_rowid(mat: *const MoraineMat, index: usize) -> i64 {
    let mat = &*mat;
    crate::txn::rowid(mat.mat.id, mat.position(index))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_mat_cell(
    mat: *const MoraineMat,
    row: usize,
    col: usize,
    out: *mut MoraineCell,
) {
    let mat = &*mat;
    *out = cell_to_c(mat.cell(row, col).unwrap_or(&Cell::Null));
}

/// Rows `start..start + count` of integer column `col` into `values`, with `valid[i]` 0 for a
/// NULL (and for a row past the end): a whole vector in one call. An unnarrowed or densely
/// narrowed scan copies from the column the row set keeps as integers; a sparse selection (an
/// index lookup of a few rows) reads its rows directly rather than build that column. Returns
/// false, writing nothing to rely on, when a cell read is not an integer or NULL (the caller
/// then reads cell by cell).
#[no_mangle]
pub unsafe extern "C" fn moraine_mat_ints(
    mat: *const MoraineMat,
    start: usize,
    count: usize,
    col: usize,
    values: *mut i64,
    valid: *mut u8,
) -> bool {
    if count == 0 {
        return true;
    }
    let mat = &*mat;
    let values = std::slice::from_raw_parts_mut(values, count);
    let valid = std::slice::from_raw_parts_mut(valid, count);
    let rows = &mat.mat.rows.0;
    let sparse = mat
        .selection
        .as_ref()
        .is_some_and(|sel| sel.len().saturating_mul(4) < rows.len());
    if sparse {
        for i in 0..count {
            match start.checked_add(i).and_then(|r| mat.cell(r, col)) {
                Some(Cell::Int(v)) => {
                    values[i] = *v;
                    valid[i] = 1;
                }
                Some(Cell::Null) | None => valid[i] = 0,
                Some(_) => return false,
            }
        }
        return true;
    }
    let Some(column) = rows.int_column(col) else {
        return false;
    };
    match &mat.selection {
        None => {
            let len = column.values.len();
            let from = start.min(len);
            let end = start.saturating_add(count).min(len);
            let n = end - from;
            values[..n].copy_from_slice(&column.values[from..end]);
            valid[..n].copy_from_slice(&column.valid[from..end]);
            valid[n..].fill(0);
        }
        Some(sel) => {
            for i in 0..count {
                match start
                    .checked_add(i)
                    .and_then(|r| sel.get(r))
                    .map(|&p| p as usize)
                {
                    Some(p) if p < column.values.len() => {
                        values[i] = column.values[p];
                        valid[i] = column.valid[p];
                    }
                    _ => valid[i] = 0,
                }
            }
        }
    }
    true
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
    }))
}

#[no_mangle]
pub unsafe extern "C" fn moraine_rows_push(rows: *mut MoraineRows, cell: *const MoraineCell) {
    // A malformed cell (bad UTF-8) becomes NULL here and is refused at commit by validation;
    // C++ only produces well-formed cells.
    let cell = cell_from_c(&*cell).unwrap_or(Cell::Null);
    (*rows).cells.push(cell);
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
        lock(&*txn).stage_insert(
            text(schema, schema_len)?,
            text(name, name_len)?,
            rows_of(rows),
        )
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
        let rowids = if nrowids == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(rowids, nrowids)
        };
        let cols = if ncols == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(cols, ncols)
        };
        let values = rows_of(rows);
        let mut txn = lock(&*txn);
        let mut updates: Vec<(i64, Row)> = Vec::with_capacity(rowids.len());
        let mut position = std::collections::HashMap::new();
        for (i, rowid) in rowids.iter().enumerate() {
            let (mat, index) = txn.resolve(*rowid)?;
            // (resolve checked the index)
            let mut row = mat.rows.get(index).cloned().unwrap_or_default();
            for (j, col) in cols.iter().enumerate() {
                let value = values
                    .get(i)
                    .and_then(|v| v.get(j))
                    .cloned()
                    .unwrap_or(Cell::Null);
                row[*col] = value;
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
        txn.stage_update(text(schema, schema_len)?, text(name, name_len)?, updates)
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
        let rowids = if nrowids == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(rowids, nrowids)
        };
        lock(&*txn).stage_delete(
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
    moraine_cpp_register(loader);
}
