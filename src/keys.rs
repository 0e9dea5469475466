//! Order-preserving key encoding and the keyspace (RFC 0002).
//!
//! A key is a tuple of segments. Each segment is a tag byte and a payload chosen so that the
//! byte order of encoded keys is the tuple order of their segments:
//! - `Int`: tag, then the i64 with its sign bit flipped, big-endian (so -1 < 0 < 1);
//! - `Text`/`Blob`: tag, the bytes with `0x00` escaped as `0x00 0xFF`, then the terminator
//!   `0x00 0x01` (so "ab" < "ab\0" < "abc", and a segment is never a prefix of another one);
//! - `Float`: tag, the IEEE bits made sortable (negatives inverted, positives sign-flipped);
//! - `Bool`: tag, 0 or 1; `Null`: the tag alone (it sorts first).
//!
//! Segments are self-delimiting, so "the keys of table `ducklake_table`" is a plain byte prefix
//! that does not also match `ducklake_table_stats`. The docs write keys as `current/<table>/...`;
//! the `/` there stands for a segment boundary.

use crate::cell::Cell;
use crate::error::{Error, Result};

const TAG_NULL: u8 = 0x01;
const TAG_BOOL: u8 = 0x02;
const TAG_INT: u8 = 0x03;
const TAG_FLOAT: u8 = 0x04;
const TAG_TEXT: u8 = 0x05;
const TAG_BLOB: u8 = 0x06;

/// Builds a key segment by segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Key(Vec<u8>);

impl Key {
    pub fn new() -> Self {
        Key(Vec::with_capacity(48))
    }

    /// Append a text segment.
    pub fn s(mut self, v: &str) -> Self {
        push_escaped(&mut self.0, TAG_TEXT, v.as_bytes());
        self
    }

    /// Append an integer segment.
    pub fn i(mut self, v: i64) -> Self {
        push_int(&mut self.0, v);
        self
    }

    /// Append one segment per cell.
    pub fn cells(mut self, cells: &[Cell]) -> Self {
        for c in cells {
            push_cell(&mut self.0, c);
        }
        self
    }

    /// Append one segment.
    pub fn cell(mut self, c: &Cell) -> Self {
        push_cell(&mut self.0, c);
        self
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

fn push_int(out: &mut Vec<u8>, v: i64) {
    out.push(TAG_INT);
    out.extend_from_slice(&((v as u64) ^ (1u64 << 63)).to_be_bytes());
}

fn push_escaped(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.push(0x00);
    out.push(0x01);
}

/// Append the order-preserving encoding of one cell.
pub fn push_cell(out: &mut Vec<u8>, c: &Cell) {
    match c {
        Cell::Null => out.push(TAG_NULL),
        Cell::Bool(b) => {
            out.push(TAG_BOOL);
            out.push(*b as u8);
        }
        Cell::Int(v) => push_int(out, *v),
        Cell::Float(f) => {
            let bits = f.to_bits();
            let sortable = if bits >> 63 == 1 {
                !bits
            } else {
                bits ^ (1u64 << 63)
            };
            out.push(TAG_FLOAT);
            out.extend_from_slice(&sortable.to_be_bytes());
        }
        Cell::Text(s) => push_escaped(out, TAG_TEXT, s.as_bytes()),
        Cell::Blob(b) => push_escaped(out, TAG_BLOB, b),
    }
}

/// A key as a reader would name it: its segments joined by `/` (`lake/main/current/t/1/1`),
/// or its bytes in hex when it does not decode.
pub fn show(key: &[u8]) -> String {
    match decode_key(key) {
        Ok(cells) => cells
            .iter()
            .map(|c| match c {
                Cell::Text(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("/"),
        Err(_) => key.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// Encode a tuple of cells as one key.
pub fn encode_key(cells: &[Cell]) -> Vec<u8> {
    Key::new().cells(cells).into_bytes()
}

/// Decode a key written by [`encode_key`] / [`Key`] back into its segments.
pub fn decode_key(b: &[u8]) -> Result<Vec<Cell>> {
    Ok(decode_leading(b, usize::MAX)?.0)
}

/// The encoded bytes of the segment `key` starts with (tag included), without decoding it.
fn segment_len(key: &[u8]) -> Result<usize> {
    let bad = |what: &str| Error::Corrupt(format!("malformed key: {what}"));
    let (&tag, rest) = key.split_first().ok_or_else(|| bad("empty segment"))?;
    let (body, truncated) = match tag {
        TAG_NULL => (0, ""),
        TAG_BOOL => (1, "truncated bool"),
        TAG_INT | TAG_FLOAT => (8, "truncated number"),
        TAG_TEXT | TAG_BLOB => {
            let mut i = 0;
            let end = loop {
                match rest.get(i) {
                    None => return Err(bad("unterminated string")),
                    Some(0) => match rest.get(i + 1) {
                        Some(0xFF) => i += 2,
                        Some(0x01) => break i + 2,
                        _ => return Err(bad("unterminated string")),
                    },
                    Some(_) => i += 1,
                }
            };
            (end, "")
        }
        t => return Err(bad(&format!("unknown segment tag {t}"))),
    };
    if rest.len() < body {
        return Err(bad(truncated));
    }
    Ok(1 + body)
}

/// The first `max` segments of `key` (fewer if it has fewer), each still encoded (tag
/// included): for code that only compares or copies segments, without decoding their cells.
pub fn raw_segments(key: &[u8], max: usize) -> Result<Vec<&[u8]>> {
    let mut out = Vec::with_capacity(max.min(8));
    let mut pos = 0;
    while pos < key.len() && out.len() < max {
        let len = segment_len(&key[pos..])?;
        out.push(&key[pos..pos + len]);
        pos += len;
    }
    Ok(out)
}

/// Whether an encoded segment (see [`raw_segments`]) is the text `text`.
pub fn segment_is_text(segment: &[u8], text: &str) -> bool {
    let t = text.as_bytes();
    segment.len() == t.len() + 3
        && segment[0] == TAG_TEXT
        && &segment[1..1 + t.len()] == t
        && segment.ends_with(&[0x00, 0x01])
        && !t.contains(&0)
}

/// Decode at most `max` leading segments of a key; also returns how many bytes they take, so
/// `&key[..len]` is the key prefix of exactly those segments.
pub fn decode_leading(key: &[u8], max: usize) -> Result<(Vec<Cell>, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < key.len() && out.len() < max {
        let len = segment_len(&key[pos..])?;
        out.push(decode_segment(&key[pos..pos + len])?);
        pos += len;
    }
    Ok((out, pos))
}

/// The cell of one whole segment, as [`segment_len`] delimited it (so its length is right for
/// its tag and a text or blob ends with its terminator, every NUL in it escaped).
fn decode_segment(segment: &[u8]) -> Result<Cell> {
    let bad = |what: &str| Error::Corrupt(format!("malformed key: {what}"));
    let body = &segment[1..];
    Ok(match segment[0] {
        TAG_NULL => Cell::Null,
        TAG_BOOL => Cell::Bool(match body[0] {
            0 => false,
            1 => true,
            v => return Err(bad(&format!("bool byte {v}"))),
        }),
        tag @ (TAG_INT | TAG_FLOAT) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(body);
            let u = u64::from_be_bytes(a);
            if tag == TAG_INT {
                Cell::Int((u ^ (1u64 << 63)) as i64)
            } else {
                let bits = if u >> 63 == 1 { u ^ (1u64 << 63) } else { !u };
                Cell::Float(f64::from_bits(bits))
            }
        }
        tag => {
            // text or blob: drop the terminator, and the 0xFF after each escaped NUL
            let escaped = &body[..body.len() - 2];
            let mut v = Vec::with_capacity(escaped.len());
            let mut bytes = escaped.iter();
            while let Some(&b) = bytes.next() {
                v.push(b);
                if b == 0 {
                    bytes.next();
                }
            }
            if tag == TAG_TEXT {
                Cell::Text(String::from_utf8(v).map_err(|_| bad("text is not UTF-8"))?)
            } else {
                Cell::Blob(v)
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// The keyspace. Every key moraine writes is built by one of these functions.
// ---------------------------------------------------------------------------------------------

/// `sys/format`: marks a SlateDB database as a moraine store; value = store format version.
pub fn sys_format() -> Vec<u8> {
    Key::new().s("sys").s("format").into_bytes()
}

/// `sys/head`: the latest committed snapshot id and the count of committed batches.
pub fn sys_head() -> Vec<u8> {
    Key::new().s("sys").s("head").into_bytes()
}

/// `sys/schema/<schema>`.
pub fn sys_schema(name: &str) -> Vec<u8> {
    Key::new().s("sys").s("schema").s(name).into_bytes()
}

pub fn sys_schema_prefix() -> Vec<u8> {
    Key::new().s("sys").s("schema").into_bytes()
}

/// `sys/table/<schema>/<name>`.
pub fn sys_table(schema: &str, name: &str) -> Vec<u8> {
    Key::new()
        .s("sys")
        .s("table")
        .s(schema)
        .s(name)
        .into_bytes()
}

pub fn sys_table_prefix() -> Vec<u8> {
    Key::new().s("sys").s("table").into_bytes()
}

pub fn sys_table_schema_prefix(schema: &str) -> Vec<u8> {
    Key::new().s("sys").s("table").s(schema).into_bytes()
}

/// `image/...`: the committed image's own records (RFC 0009), outside every lake's catalog and
/// never part of an image.
pub fn image_prefix() -> Vec<u8> {
    Key::new().s("image").into_bytes()
}

/// `image/checkpoint`: where the newest image checkpoint object is, and the batch it holds.
pub fn image_checkpoint() -> Vec<u8> {
    Key::new().s("image").s("checkpoint").into_bytes()
}

/// `image/log/`: every commit-log record.
pub fn image_log_prefix() -> Vec<u8> {
    Key::new().s("image").s("log").into_bytes()
}

/// `image/log/<batch>`: the writes of the commit that made batch `<batch>`, which bring an
/// image checkpoint (or a reader's image) up to a later head.
pub fn image_log(batch: u64) -> Vec<u8> {
    Key::new().s("image").s("log").i(batch as i64).into_bytes()
}

/// The lake whose keys carry no lake segment: DuckLake's default METADATA_SCHEMA. A store may
/// hold more lakes, one per schema of the metadata catalog (DuckLake's METADATA_SCHEMA option);
/// their snapshot and row keys start with `lake/<schema>/`.
pub const DEFAULT_LAKE: &str = "main";

fn lake(lake: &str) -> Key {
    if lake == DEFAULT_LAKE {
        Key::new()
    } else {
        Key::new().s("lake").s(lake)
    }
}

/// `lake/<lake>/head`: the head snapshot id of a lake other than the default one (whose head
/// snapshot is in `sys/head`, with the store's batch count).
pub fn lake_head(name: &str) -> Vec<u8> {
    Key::new().s("lake").s(name).s("head").into_bytes()
}

/// `[lake/<lake>/]snapshot/<id>`: the merged ducklake_snapshot + ducklake_snapshot_changes record.
pub fn snapshot(lake_name: &str, id: i64) -> Vec<u8> {
    lake(lake_name).s("snapshot").i(id).into_bytes()
}

pub fn snapshot_prefix(lake_name: &str) -> Vec<u8> {
    lake(lake_name).s("snapshot").into_bytes()
}

/// `[lake/<lake>/]current/<table>/<key cells>[/<begin_snapshot>]`: a live row. Versioned kinds
/// pass the row's begin_snapshot; unversioned kinds pass `None`.
pub fn current(lake_name: &str, table: &str, key_cells: &[Cell], begin: Option<&Cell>) -> Vec<u8> {
    let k = lake(lake_name).s("current").s(table).cells(key_cells);
    match begin {
        Some(b) => k.cell(b).into_bytes(),
        None => k.into_bytes(),
    }
}

pub fn current_prefix(lake_name: &str, table: &str) -> Vec<u8> {
    lake(lake_name).s("current").s(table).into_bytes()
}

/// `[lake/<lake>/]history/<table>/<key cells>/<end_snapshot>/<begin_snapshot>`: an ended version.
pub fn history(
    lake_name: &str,
    table: &str,
    key_cells: &[Cell],
    end: &Cell,
    begin: &Cell,
) -> Vec<u8> {
    lake(lake_name)
        .s("history")
        .s(table)
        .cells(key_cells)
        .cell(end)
        .cell(begin)
        .into_bytes()
}

/// Every ended version of a lake: `[lake/<lake>/]history/`.
pub fn history_root(lake_name: &str) -> Vec<u8> {
    lake(lake_name).s("history").into_bytes()
}

pub fn history_prefix(lake_name: &str, table: &str) -> Vec<u8> {
    lake(lake_name).s("history").s(table).into_bytes()
}

/// Every ended version of one entity: `[lake/<lake>/]history/<table>/<key cells>`.
pub fn history_entity_prefix(lake_name: &str, table: &str, key_cells: &[Cell]) -> Vec<u8> {
    lake(lake_name)
        .s("history")
        .s(table)
        .cells(key_cells)
        .into_bytes()
}

/// Everything stored for one inlined table.
pub fn inline_table_prefix(schema: &str, table: &str) -> Vec<u8> {
    Key::new().s("inline").s(schema).s(table).into_bytes()
}

/// `inline/<schema>/<table>/chunk/<seq>`: one Arrow IPC body of rows.
pub fn inline_chunk(schema: &str, table: &str, seq: i64) -> Vec<u8> {
    Key::new()
        .s("inline")
        .s(schema)
        .s(table)
        .s("chunk")
        .i(seq)
        .into_bytes()
}

pub fn inline_chunk_prefix(schema: &str, table: &str) -> Vec<u8> {
    Key::new()
        .s("inline")
        .s(schema)
        .s(table)
        .s("chunk")
        .into_bytes()
}

/// `inline/<schema>/<table>/rowid/<min row_id>/<seq>`: the row-id locator of a chunk (empty
/// value). `min_row_id` is NULL for tables without a leading `row_id` column.
pub fn inline_locator(schema: &str, table: &str, min_row_id: &Cell, seq: i64) -> Vec<u8> {
    Key::new()
        .s("inline")
        .s(schema)
        .s(table)
        .s("rowid")
        .cell(min_row_id)
        .i(seq)
        .into_bytes()
}

pub fn inline_locator_prefix(schema: &str, table: &str) -> Vec<u8> {
    Key::new()
        .s("inline")
        .s(schema)
        .s(table)
        .s("rowid")
        .into_bytes()
}

/// `e` with the key of the record it was read from, when it says the record is corrupt; any
/// other error as it is.
pub fn at_key(e: Error, key: &[u8]) -> Error {
    match e {
        Error::Corrupt(what) => Error::Corrupt(format!("{what} (record {})", show(key))),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted_by_bytes(mut keys: Vec<Vec<Cell>>) -> Vec<Vec<Cell>> {
        keys.sort_by_key(|k| encode_key(k));
        keys
    }

    #[test]
    fn ids_sort_numerically_including_negatives() {
        let vals = [
            i64::MIN,
            -1_000_000,
            -256,
            -2,
            -1,
            0,
            1,
            2,
            255,
            256,
            65_536,
            i64::MAX,
        ];
        let mut enc: Vec<_> = vals.iter().map(|v| encode_key(&[Cell::Int(*v)])).collect();
        let before = enc.clone();
        enc.sort();
        assert_eq!(enc, before, "byte order must equal numeric order");
        for v in vals {
            assert_eq!(
                decode_key(&encode_key(&[Cell::Int(v)])).unwrap(),
                vec![Cell::Int(v)]
            );
        }
    }

    #[test]
    fn strings_with_common_prefixes_sort_right() {
        let words = [
            "",
            "a",
            "a\0",
            "a\0b",
            "ab",
            "abc",
            "b",
            "ducklake_table",
            "ducklake_table_stats",
        ];
        let mut enc: Vec<_> = words
            .iter()
            .map(|w| encode_key(&[Cell::Text(w.to_string())]))
            .collect();
        let before = enc.clone();
        enc.sort();
        assert_eq!(enc, before);
        // a composite key with a shorter first segment sorts before a longer one, whatever follows
        let k = sorted_by_bytes(vec![
            vec![Cell::Text("ab".into()), Cell::Int(0)],
            vec![Cell::Text("a".into()), Cell::Int(i64::MAX)],
            vec![Cell::Text("a".into()), Cell::Int(-5)],
        ]);
        assert_eq!(k[0], vec![Cell::Text("a".into()), Cell::Int(-5)]);
        assert_eq!(k[2], vec![Cell::Text("ab".into()), Cell::Int(0)]);
    }

    #[test]
    fn table_prefixes_do_not_capture_longer_table_names() {
        let p = current_prefix(DEFAULT_LAKE, "ducklake_table");
        let own = current(
            DEFAULT_LAKE,
            "ducklake_table",
            &[Cell::Int(1)],
            Some(&Cell::Int(0)),
        );
        let other = current(DEFAULT_LAKE, "ducklake_table_stats", &[Cell::Int(1)], None);
        assert!(own.starts_with(&p));
        assert!(!other.starts_with(&p));
        assert!(!history(
            DEFAULT_LAKE,
            "ducklake_table",
            &[Cell::Int(1)],
            &Cell::Int(2),
            &Cell::Int(0)
        )
        .starts_with(&p));
    }

    #[test]
    fn floats_nulls_and_blobs_round_trip_in_order() {
        let vals = [
            f64::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            1e-300,
            3.0,
            f64::INFINITY,
        ];
        let enc: Vec<_> = vals
            .iter()
            .map(|v| encode_key(&[Cell::Float(*v)]))
            .collect();
        let mut sorted = enc.clone();
        sorted.sort();
        assert_eq!(enc, sorted);
        let row = vec![
            Cell::Null,
            Cell::Bool(true),
            Cell::Float(-2.5),
            Cell::Blob(vec![0, 0xFF, 0, 1]),
            Cell::Text("x\0y".into()),
            Cell::Int(-7),
        ];
        assert_eq!(decode_key(&encode_key(&row)).unwrap(), row);
        // NULL sorts before every value
        assert!(encode_key(&[Cell::Null]) < encode_key(&[Cell::Int(i64::MIN)]));
    }

    #[test]
    fn snapshot_keys_sort_by_id_and_history_by_end() {
        let snapshot = |id| snapshot(DEFAULT_LAKE, id);
        assert!(snapshot(-1) < snapshot(0));
        assert!(snapshot(9) < snapshot(10));
        assert!(snapshot(255) < snapshot(256));
        let h1 = history(
            DEFAULT_LAKE,
            "t",
            &[Cell::Int(1)],
            &Cell::Int(5),
            &Cell::Int(1),
        );
        let h2 = history(
            DEFAULT_LAKE,
            "t",
            &[Cell::Int(1)],
            &Cell::Int(10),
            &Cell::Int(5),
        );
        assert!(h1 < h2);
        assert!(decode_key(&[0x05, b'a']).is_err());
    }

    #[test]
    fn each_lake_has_its_own_keys() {
        let main = current(DEFAULT_LAKE, "ducklake_table", &[Cell::Int(1)], None);
        let other = current("metadata_s2", "ducklake_table", &[Cell::Int(1)], None);
        assert_ne!(main, other);
        assert!(!other.starts_with(&current_prefix(DEFAULT_LAKE, "ducklake_table")));
        assert!(other.starts_with(&current_prefix("metadata_s2", "ducklake_table")));
        assert!(!snapshot("metadata_s2", 1).starts_with(&snapshot_prefix(DEFAULT_LAKE)));
        assert!(!snapshot(DEFAULT_LAKE, 1).starts_with(&snapshot_prefix("metadata_s2")));
        assert!(!lake_head("metadata_s2").starts_with(&snapshot_prefix("metadata_s2")));
    }
}
