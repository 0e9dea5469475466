//! Cells and rows: DuckLake's own values, as the C++ layer hands them over, and the row codec
//! every stored record uses.
//!
//! A [`Cell`] is one value. Integers of every width DuckDB has that fit an `i64` arrive as
//! [`Cell::Int`]; `VARCHAR` as [`Cell::Text`]; `BOOLEAN` as [`Cell::Bool`]; `DOUBLE`/`FLOAT` as
//! [`Cell::Float`]. Anything the core need not interpret (UUID, TIMESTAMPTZ, DECIMAL, nested
//! types...) arrives as [`Cell::Blob`]: a DuckDB value serialized by the C++ layer, stored and
//! returned byte for byte.
//!
//! Row codec (format version 1): `[version=1][varint n][cell]*n`, each cell a tag byte and its
//! payload (`Int`/`Float` 8 bytes little-endian, `Bool` 1 byte, `Text`/`Blob` varint length and
//! bytes). The leading version byte lets a later format coexist with stored version-1 records.

use crate::error::{Error, Result};
use std::fmt;
use std::hash::{Hash, Hasher};

/// One value of a DuckLake row.
#[derive(Debug, Clone)]
pub enum Cell {
    Null,
    Int(i64),
    Bool(bool),
    Float(f64),
    Text(String),
    /// An opaque DuckDB value serialized by the C++ layer.
    Blob(Vec<u8>),
}

/// One row: cells in the table's column order.
pub type Row = Vec<Cell>;

impl Cell {
    pub fn is_null(&self) -> bool {
        matches!(self, Cell::Null)
    }

    /// The cell borrowed, as a record holds it.
    pub fn as_ref(&self) -> CellRef<'_> {
        match self {
            Cell::Null => CellRef::Null,
            Cell::Int(v) => CellRef::Int(*v),
            Cell::Bool(v) => CellRef::Bool(*v),
            Cell::Float(v) => CellRef::Float(*v),
            Cell::Text(v) => CellRef::Text(v),
            Cell::Blob(v) => CellRef::Blob(v),
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Cell::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }
}

// Equality is bitwise for floats so that a row holding NaN still equals itself: the overlay and
// the translator find "the row equal to `old`", and that must work for every row a scan emitted.
impl PartialEq for Cell {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Cell::Null, Cell::Null) => true,
            (Cell::Int(a), Cell::Int(b)) => a == b,
            (Cell::Bool(a), Cell::Bool(b)) => a == b,
            (Cell::Float(a), Cell::Float(b)) => a.to_bits() == b.to_bits(),
            (Cell::Text(a), Cell::Text(b)) => a == b,
            (Cell::Blob(a), Cell::Blob(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Cell {}

impl Hash for Cell {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Cell::Null => {}
            Cell::Int(v) => v.hash(state),
            Cell::Bool(v) => v.hash(state),
            Cell::Float(v) => v.to_bits().hash(state),
            Cell::Text(v) => v.hash(state),
            Cell::Blob(v) => v.hash(state),
        }
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Null => write!(f, "NULL"),
            Cell::Int(v) => write!(f, "{v}"),
            Cell::Bool(v) => write!(f, "{v}"),
            Cell::Float(v) => write!(f, "{v}"),
            Cell::Text(v) => write!(f, "'{v}'"),
            Cell::Blob(v) => write!(f, "<{} byte value>", v.len()),
        }
    }
}

/// Current row format version (the first byte of every encoded row).
pub const ROW_FORMAT_VERSION: u8 = 1;

const TAG_NULL: u8 = 0;
const TAG_INT: u8 = 1;
const TAG_BOOL: u8 = 2;
const TAG_FLOAT: u8 = 3;
const TAG_TEXT: u8 = 4;
const TAG_BLOB: u8 = 5;

/// Encode a row: version byte, cell count, cells.
pub fn encode_row(row: &[Cell]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + row.len() * 9);
    out.push(ROW_FORMAT_VERSION);
    put_cells(&mut out, row);
    out
}

/// The cell count and the cells, as both row formats end.
fn put_cells(out: &mut Vec<u8>, row: &[Cell]) {
    put_varint(out, row.len() as u64);
    for cell in row {
        match cell {
            Cell::Null => out.push(TAG_NULL),
            Cell::Int(v) => {
                out.push(TAG_INT);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Cell::Bool(v) => {
                out.push(TAG_BOOL);
                out.push(*v as u8);
            }
            Cell::Float(v) => {
                out.push(TAG_FLOAT);
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Cell::Text(v) => {
                out.push(TAG_TEXT);
                put_varint(out, v.len() as u64);
                out.extend_from_slice(v.as_bytes());
            }
            Cell::Blob(v) => {
                out.push(TAG_BLOB);
                put_varint(out, v.len() as u64);
                out.extend_from_slice(v);
            }
        }
    }
}

/// Where a stored row was first written: (batch count of the commit, position of its operation
/// in that commit). Rows are served in this order, the order a DuckDB-file catalog appends them;
/// an update keeps the row's place, as DuckDB's in-place updates do.
pub type WriteSeq = (u64, u64);

/// The format of a row record that leads with its [`WriteSeq`].
pub const ROW_FORMAT_SEQUENCED: u8 = 2;

/// Encode a row record that carries where the row was first written.
pub fn encode_row_at(row: &[Cell], seq: WriteSeq) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + row.len() * 9);
    out.push(ROW_FORMAT_SEQUENCED);
    put_varint(&mut out, seq.0);
    put_varint(&mut out, seq.1);
    put_cells(&mut out, row);
    out
}

/// Decode a row written by [`encode_row`] or [`encode_row_at`].
pub fn decode_row(bytes: &[u8]) -> Result<Row> {
    Ok(decode_row_at(bytes)?.0)
}

/// Decode a row record and, when it carries one, where the row was first written.
pub fn decode_row_at(bytes: &[u8]) -> Result<(Row, Option<WriteSeq>)> {
    let mut row = Vec::new();
    let seq = walk_row(bytes, |_, cell| row.push(cell.to_cell()))?;
    Ok((row, seq))
}

/// A cell as a row record holds it, borrowed from the record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CellRef<'a> {
    Null,
    Int(i64),
    Bool(bool),
    Float(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl CellRef<'_> {
    pub fn to_cell(self) -> Cell {
        match self {
            CellRef::Null => Cell::Null,
            CellRef::Int(v) => Cell::Int(v),
            CellRef::Bool(v) => Cell::Bool(v),
            CellRef::Float(v) => Cell::Float(v),
            CellRef::Text(v) => Cell::Text(v.to_string()),
            CellRef::Blob(v) => Cell::Blob(v.to_vec()),
        }
    }
}

/// Check a whole row record (either format), handing each cell to `visit` with its column
/// without copying it; returns where the row was first written, when the record carries it. A
/// record this accepts decodes without error.
pub fn walk_row<'a>(
    bytes: &'a [u8],
    mut visit: impl FnMut(usize, CellRef<'a>),
) -> Result<Option<WriteSeq>> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let version = r.byte()?;
    let seq = match version {
        ROW_FORMAT_VERSION => None,
        ROW_FORMAT_SEQUENCED => Some((r.varint()?, r.varint()?)),
        _ => {
            return Err(Error::Corrupt(format!(
                "row record has format version {version}; this build reads versions \
                 {ROW_FORMAT_VERSION} and {ROW_FORMAT_SEQUENCED}"
            )))
        }
    };
    let n = r.varint()? as usize;
    if n > bytes.len() {
        return Err(Error::Corrupt(format!(
            "row record claims {n} cells in {} bytes",
            bytes.len()
        )));
    }
    for column in 0..n {
        visit(column, r.cell()?);
    }
    if r.pos != bytes.len() {
        return Err(Error::Corrupt(format!(
            "row record has {} trailing bytes",
            bytes.len() - r.pos
        )));
    }
    Ok(seq)
}

/// The cell in `column` of a row record that has passed [`walk_row`] (`None` past its last
/// cell), stepping over the cells before it without checking them again.
pub fn cell_at(bytes: &[u8], column: usize) -> Result<Option<CellRef<'_>>> {
    let mut r = Reader { buf: bytes, pos: 0 };
    if r.byte()? == ROW_FORMAT_SEQUENCED {
        r.varint()?;
        r.varint()?;
    }
    let n = r.varint()? as usize;
    if column >= n {
        return Ok(None);
    }
    for _ in 0..column {
        match r.byte()? {
            TAG_NULL => {}
            TAG_BOOL => {
                r.take(1)?;
            }
            TAG_INT | TAG_FLOAT => {
                r.take(8)?;
            }
            TAG_TEXT | TAG_BLOB => {
                let len = r.varint()? as usize;
                r.take(len)?;
            }
            t => {
                return Err(Error::Corrupt(format!(
                    "row record has unknown cell tag {t}"
                )))
            }
        }
    }
    Ok(Some(r.cell()?))
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| Error::Corrupt("row record is truncated".into()))?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            return Err(Error::Corrupt("row record is truncated".into()));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// The next cell: its tag, then its value.
    fn cell(&mut self) -> Result<CellRef<'a>> {
        Ok(match self.byte()? {
            TAG_NULL => CellRef::Null,
            TAG_INT => CellRef::Int(i64::from_le_bytes(self.array::<8>()?)),
            TAG_BOOL => CellRef::Bool(self.byte()? != 0),
            TAG_FLOAT => CellRef::Float(f64::from_bits(u64::from_le_bytes(self.array::<8>()?))),
            TAG_TEXT => {
                let len = self.varint()? as usize;
                CellRef::Text(std::str::from_utf8(self.take(len)?).map_err(|_| {
                    Error::Corrupt("row record holds a text cell that is not UTF-8".into())
                })?)
            }
            TAG_BLOB => {
                let len = self.varint()? as usize;
                CellRef::Blob(self.take(len)?)
            }
            t => {
                return Err(Error::Corrupt(format!(
                    "row record has unknown cell tag {t}"
                )))
            }
        })
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift >= 64 {
                return Err(Error::Corrupt("row record has an overlong varint".into()));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Row {
        vec![
            Cell::Null,
            Cell::Int(i64::MIN),
            Cell::Int(-1),
            Cell::Int(0),
            Cell::Int(i64::MAX),
            Cell::Bool(true),
            Cell::Bool(false),
            Cell::Float(1.5),
            Cell::Float(f64::NAN),
            Cell::Float(-0.0),
            Cell::Text(String::new()),
            Cell::Text("ducklake_table é \u{0}".into()),
            Cell::Blob(vec![]),
            Cell::Blob((0..=255).collect()),
            Cell::Text("x".repeat(300)),
        ]
    }

    #[test]
    fn one_cell_is_read_as_the_whole_walk_reads_it() {
        let row = sample();
        for record in [encode_row(&row), encode_row_at(&row, (7, 300))] {
            let mut walked = Vec::new();
            walk_row(&record, |_, c| walked.push(c)).unwrap();
            for (column, cell) in walked.iter().enumerate() {
                // compared as written: NaN is not equal to itself
                let got = cell_at(&record, column)
                    .unwrap()
                    .map(|c| encode_row(&[c.to_cell()]));
                assert_eq!(got, Some(encode_row(&[cell.to_cell()])), "column {column}");
            }
            assert_eq!(cell_at(&record, row.len()).unwrap(), None);
            // a record cut short is an error, never a read past its end
            for cut in 0..record.len() {
                let _ = cell_at(&record[..cut], row.len() - 1);
            }
            assert!(cell_at(&record[..record.len() - 1], row.len() - 1).is_err());
        }
    }

    #[test]
    fn row_round_trips() {
        let row = sample();
        let bytes = encode_row(&row);
        assert_eq!(bytes[0], ROW_FORMAT_VERSION);
        assert_eq!(decode_row(&bytes).unwrap(), row);
        assert_eq!(decode_row(&encode_row(&[])).unwrap(), Vec::<Cell>::new());
        assert_eq!(decode_row_at(&bytes).unwrap(), (row.clone(), None));
        let seq = (u64::MAX, 300);
        let at = encode_row_at(&row, seq);
        assert_eq!(at[0], ROW_FORMAT_SEQUENCED);
        assert_eq!(decode_row_at(&at).unwrap(), (row.clone(), Some(seq)));
        assert_eq!(decode_row(&at).unwrap(), row);
        for cut in 0..at.len() {
            assert!(decode_row_at(&at[..cut]).is_err(), "truncated at {cut}");
        }
    }

    #[test]
    fn walking_a_row_visits_the_cells_decoding_reads() {
        let row = sample();
        let at = encode_row_at(&row, (3, 4));
        let mut seen = Vec::new();
        let seq = walk_row(&at, |i, c| seen.push((i, c.to_cell()))).unwrap();
        assert_eq!(seq, Some((3, 4)));
        assert_eq!(seen.len(), row.len());
        for (i, (at, cell)) in seen.iter().enumerate() {
            assert_eq!((*at, cell), (i, &row[i]));
            assert_eq!(row[i].as_ref().to_cell(), row[i]);
        }
        for cut in 0..at.len() {
            assert!(
                walk_row(&at[..cut], |_, _| {}).is_err(),
                "truncated at {cut}"
            );
        }
        let mut bad_text = encode_row(&[Cell::Text("ab".into())]);
        *bad_text.last_mut().unwrap() = 0xff;
        assert!(walk_row(&bad_text, |_, _| {}).is_err());
    }

    #[test]
    fn nan_equals_itself_and_zero_signs_differ() {
        assert_eq!(Cell::Float(f64::NAN), Cell::Float(f64::NAN));
        assert_ne!(Cell::Float(0.0), Cell::Float(-0.0));
        assert_ne!(Cell::Int(1), Cell::Float(1.0));
    }

    #[test]
    fn bad_records_are_errors_not_panics() {
        let good = encode_row(&sample());
        for cut in 0..good.len() {
            assert!(decode_row(&good[..cut]).is_err(), "truncated at {cut}");
        }
        let mut wrong_version = good.clone();
        wrong_version[0] = 9;
        let e = decode_row(&wrong_version).unwrap_err().to_string();
        assert!(e.contains("format version 9"), "{e}");
        let mut trailing = good;
        trailing.push(0);
        assert!(decode_row(&trailing).is_err());
        assert!(decode_row(&[1, 1, 77]).is_err());
    }
}
