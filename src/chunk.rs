//! Inline chunks: a run of an inlined table's rows as one Arrow IPC stream body.
//!
//! One Arrow column per table column, all nullable. A column's Arrow type follows the cells it
//! holds: `Int` -> Int64, `Text` -> Utf8, `Bool` -> Boolean, `Float` -> Float64, `Blob` ->
//! Binary, and a column holding only NULLs -> Null. The body is self-describing, so decoding
//! needs no table definition. A value is `[format version = 1][Arrow IPC stream]`.

use crate::cell::{Cell, Row};
use crate::error::{Error, Result};
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder,
};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Float64Array, Int64Array, NullArray, RecordBatch,
    RecordBatchOptions, StringArray,
};
use arrow_ipc::reader::StreamDecoder;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

const CHUNK_FORMAT_VERSION: u8 = 1;

fn cell_type(c: &Cell) -> Option<DataType> {
    match c {
        Cell::Null => None,
        Cell::Int(_) => Some(DataType::Int64),
        Cell::Bool(_) => Some(DataType::Boolean),
        Cell::Float(_) => Some(DataType::Float64),
        Cell::Text(_) => Some(DataType::Utf8),
        Cell::Blob(_) => Some(DataType::Binary),
    }
}

fn mixed(table: &str, column: &str, ty: &DataType, cell: &Cell) -> Error {
    Error::InvalidInput(format!(
        "inlined table {table}, column {column}: a {ty} column cannot hold the value {cell}"
    ))
}

/// Encode rows (every row as wide as `columns`) as one chunk body.
pub fn encode_chunk(table: &str, columns: &[String], rows: &[Row]) -> Result<Vec<u8>> {
    for r in rows {
        if r.len() != columns.len() {
            return Err(Error::InvalidInput(format!(
                "inlined table {table} has {} columns but a row has {} cells",
                columns.len(),
                r.len()
            )));
        }
    }
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    for (ci, name) in columns.iter().enumerate() {
        // Arrow's text and blob columns hold less than 2 GiB (32-bit offsets); no commit writes
        // more than MAX_COMMIT_BYTES, so a column past that is refused here, not overflowed
        let held: u64 = rows
            .iter()
            .map(|r| match &r[ci] {
                Cell::Text(v) => v.len() as u64,
                Cell::Blob(v) => v.len() as u64,
                _ => 0,
            })
            .sum();
        if held > crate::limits::MAX_COMMIT_BYTES {
            return Err(Error::InvalidInput(format!(
                "inlined table {table}: column {name} of one chunk would hold {}, more than one \
                 commit writes ({}); lower DuckLake's data_inlining_row_limit for the table",
                crate::limits::show_size(held),
                crate::limits::show_size(crate::limits::MAX_COMMIT_BYTES)
            )));
        }
        let ty = rows
            .iter()
            .find_map(|r| cell_type(&r[ci]))
            .unwrap_or(DataType::Null);
        let array: ArrayRef = match &ty {
            DataType::Null => Arc::new(NullArray::new(rows.len())),
            DataType::Int64 => {
                let mut b = Int64Builder::with_capacity(rows.len());
                for r in rows {
                    match &r[ci] {
                        Cell::Int(v) => b.append_value(*v),
                        Cell::Null => b.append_null(),
                        c => return Err(mixed(table, name, &ty, c)),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Boolean => {
                let mut b = BooleanBuilder::with_capacity(rows.len());
                for r in rows {
                    match &r[ci] {
                        Cell::Bool(v) => b.append_value(*v),
                        Cell::Null => b.append_null(),
                        c => return Err(mixed(table, name, &ty, c)),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Float64 => {
                let mut b = Float64Builder::with_capacity(rows.len());
                for r in rows {
                    match &r[ci] {
                        Cell::Float(v) => b.append_value(*v),
                        Cell::Null => b.append_null(),
                        c => return Err(mixed(table, name, &ty, c)),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Utf8 => {
                let mut b = StringBuilder::new();
                for r in rows {
                    match &r[ci] {
                        Cell::Text(v) => b.append_value(v),
                        Cell::Null => b.append_null(),
                        c => return Err(mixed(table, name, &ty, c)),
                    }
                }
                Arc::new(b.finish())
            }
            DataType::Binary => {
                let mut b = BinaryBuilder::new();
                for r in rows {
                    match &r[ci] {
                        Cell::Blob(v) => b.append_value(v),
                        Cell::Null => b.append_null(),
                        c => return Err(mixed(table, name, &ty, c)),
                    }
                }
                Arc::new(b.finish())
            }
            other => unreachable!("no cell maps to {other}"),
        };
        fields.push(Field::new(name, ty, true));
        arrays.push(array);
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new_with_options(
        schema.clone(),
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(rows.len())),
    )
    .map_err(|e| {
        Error::InvalidInput(format!(
            "inlined table {table}: cannot build an Arrow batch: {e}"
        ))
    })?;
    let mut out = vec![CHUNK_FORMAT_VERSION];
    {
        let arrow_err = |e: arrow_schema::ArrowError| {
            Error::InvalidInput(format!(
                "inlined table {table}: cannot write Arrow IPC: {e}"
            ))
        };
        let mut w = StreamWriter::try_new(&mut out, &schema).map_err(arrow_err)?;
        w.write(&batch).map_err(arrow_err)?;
        w.finish().map_err(arrow_err)?;
    }
    Ok(out)
}

/// How an Arrow IPC stream ends (a continuation marker and a zero length); every chunk
/// [`encode_chunk`] writes ends so.
const END_OF_STREAM: [u8; 8] = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];

/// The most cells a chunk may decode to per byte it takes: a real chunk's rows cost at least
/// 8 bytes each (the row id column of every inlined table), so this admits rows of up to 2,048
/// columns even when all but that one are NULL, and bounds what a corrupt value can make a
/// reader allocate (32 bytes a cell).
const MAX_CELLS_PER_BYTE: usize = 256;

/// A chunk that does not decode, and why.
fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::Corrupt(format!("inline chunk: {what}"))
}

/// The record batches of an Arrow IPC stream held whole in `body`: a schema, its batches, and
/// the end-of-stream marker (a stream cut at a message boundary is refused, not read short).
fn read_batches(body: &[u8]) -> Result<Vec<arrow_array::RecordBatch>> {
    let not_whole =
        |e: arrow_schema::ArrowError| corrupt(format!("not a whole Arrow IPC stream: {e}"));
    if !body.ends_with(&END_OF_STREAM) {
        return Err(corrupt(
            "the Arrow IPC stream does not end with its end-of-stream marker",
        ));
    }
    let mut decoder = StreamDecoder::new();
    let mut buffer = arrow_buffer::Buffer::from(body.to_vec());
    let mut batches = Vec::new();
    while !buffer.is_empty() {
        match decoder.decode(&mut buffer).map_err(not_whole)? {
            Some(batch) => batches.push(batch),
            None => break,
        }
    }
    decoder.finish().map_err(not_whole)?;
    if decoder.schema().is_none() {
        return Err(corrupt("the Arrow IPC stream has no schema"));
    }
    Ok(batches)
}

/// Decode a chunk body written by [`encode_chunk`].
pub fn decode_chunk(bytes: &[u8]) -> Result<Vec<Row>> {
    match bytes.first() {
        Some(&CHUNK_FORMAT_VERSION) => {}
        Some(v) => {
            return Err(corrupt(format!(
                "format version {v}; this build reads {CHUNK_FORMAT_VERSION}"
            )))
        }
        None => return Err(corrupt("empty value")),
    }
    // Arrow's reader trusts some lengths inside the stream and panics on a few hostile ones
    // (a buffer sliced past its end); a stored value is never allowed to take moraine down, so
    // such a panic is this record's corruption. The decoder works from the value's own bytes,
    // so a length it claims never sizes an allocation beyond them.
    let batches = std::panic::catch_unwind(|| read_batches(&bytes[1..])).unwrap_or_else(|_| {
        Err(corrupt(
            "the Arrow reader failed on it (a length or offset points outside the value)",
        ))
    })?;
    // Refused before any row is allocated: more cells than the value can hold (see
    // MAX_CELLS_PER_BYTE; a NULL-typed column takes no bytes, so rows alone bound nothing).
    let cells: usize = batches
        .iter()
        .map(|b| b.num_rows().saturating_mul(b.num_columns().max(1)))
        .fold(0, usize::saturating_add);
    if cells > bytes.len().saturating_mul(MAX_CELLS_PER_BYTE) {
        return Err(corrupt(format!(
            "it claims {cells} cells in a {}-byte value",
            bytes.len()
        )));
    }
    let mut rows = Vec::new();
    for batch in batches {
        let n = batch.num_rows();
        let base = rows.len();
        rows.extend((0..n).map(|_| Vec::with_capacity(batch.num_columns())));
        for col in batch.columns() {
            let out = &mut rows[base..];
            macro_rules! fill {
                ($ty:ty, $mk:expr) => {{
                    let a = col.as_any().downcast_ref::<$ty>().ok_or_else(|| {
                        corrupt(format!(
                            "column type {} does not match its array",
                            col.data_type()
                        ))
                    })?;
                    for (i, row) in out.iter_mut().enumerate() {
                        row.push(if a.is_null(i) { Cell::Null } else { $mk(a, i) });
                    }
                }};
            }
            match col.data_type() {
                DataType::Null => out.iter_mut().for_each(|r| r.push(Cell::Null)),
                DataType::Int64 => fill!(Int64Array, |a: &Int64Array, i| Cell::Int(a.value(i))),
                DataType::Boolean => {
                    fill!(BooleanArray, |a: &BooleanArray, i| Cell::Bool(a.value(i)))
                }
                DataType::Float64 => {
                    fill!(Float64Array, |a: &Float64Array, i| Cell::Float(a.value(i)))
                }
                DataType::Utf8 => fill!(StringArray, |a: &StringArray, i| Cell::Text(
                    a.value(i).to_string()
                )),
                DataType::Binary => fill!(BinaryArray, |a: &BinaryArray, i| Cell::Blob(
                    a.value(i).to_vec()
                )),
                other => return Err(corrupt(format!("unexpected Arrow type {other}"))),
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn chunk_round_trips_every_cell_kind() {
        let columns = cols(&[
            "row_id",
            "begin_snapshot",
            "end_snapshot",
            "s",
            "f",
            "b",
            "blob",
            "nothing",
        ]);
        let rows = vec![
            vec![
                Cell::Int(0),
                Cell::Int(3),
                Cell::Null,
                Cell::Text("hello".into()),
                Cell::Float(1.25),
                Cell::Bool(true),
                Cell::Blob(vec![0, 1, 2]),
                Cell::Null,
            ],
            vec![
                Cell::Int(1),
                Cell::Int(3),
                Cell::Int(4),
                Cell::Null,
                Cell::Float(f64::NAN),
                Cell::Null,
                Cell::Blob(vec![]),
                Cell::Null,
            ],
        ];
        let body = encode_chunk("ducklake_inlined_data_1_0", &columns, &rows).unwrap();
        assert_eq!(body[0], CHUNK_FORMAT_VERSION);
        assert_eq!(decode_chunk(&body).unwrap(), rows);
        let empty = encode_chunk("t", &columns, &[]).unwrap();
        assert!(decode_chunk(&empty).unwrap().is_empty());
    }

    #[test]
    fn a_chunk_claiming_more_cells_than_its_bytes_is_refused_before_allocation() {
        // 1,000 NULL-typed columns of 500,000 rows: a few kilobytes of Arrow metadata that
        // would decode to half a billion cells
        let n = 500_000;
        let fields: Vec<Field> = (0..1000)
            .map(|i| Field::new(format!("c{i}"), DataType::Null, true))
            .collect();
        let arrays: Vec<ArrayRef> = (0..1000)
            .map(|_| Arc::new(NullArray::new(n)) as ArrayRef)
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
        let mut body = vec![CHUNK_FORMAT_VERSION];
        {
            let mut w = StreamWriter::try_new(&mut body, &schema).unwrap();
            w.write(&batch).unwrap();
            w.finish().unwrap();
        }
        let e = decode_chunk(&body).unwrap_err().to_string();
        assert!(e.contains("cells"), "{e}");
    }

    #[test]
    fn mixed_columns_and_bad_bodies_are_errors() {
        let columns = cols(&["a"]);
        let e = encode_chunk(
            "t",
            &columns,
            &[vec![Cell::Int(1)], vec![Cell::Text("x".into())]],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("column a"), "{e}");
        assert!(encode_chunk("t", &columns, &[vec![]]).is_err());
        assert!(decode_chunk(&[1, 2, 3]).is_err());
        assert!(decode_chunk(&[7]).is_err());
        assert!(decode_chunk(&[]).is_err());
        // a version byte and nothing else, and a stream cut short at a message boundary
        assert!(decode_chunk(&[1]).is_err());
        let whole = encode_chunk("t", &columns, &[vec![Cell::Int(1)]]).unwrap();
        assert!(decode_chunk(&whole).is_ok());
        let cut = &whole[..whole.len() - END_OF_STREAM.len()];
        let e = decode_chunk(cut).unwrap_err().to_string();
        assert!(e.contains("end-of-stream"), "{e}");
    }
}
