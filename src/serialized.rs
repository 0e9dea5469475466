//! What the core reads of a DuckDB value the C++ layer serialized (a `Cell::Blob`): the integer
//! inside a value of a type with no extra type info that DuckDB holds as a 32- or 64-bit integer
//! (DATE, TIME, the TIMESTAMPs, ...). A scan writes such a cell straight into its vector: building
//! a deserializer and a `Value` per cell costs more than the rest of the row (every snapshot row's
//! `snapshot_time` is one). Anything else is left to DuckDB's own deserializer.

/// The integer a value serialized by DuckDB's `BinarySerializer` holds, when `bytes` are exactly
/// the layout it writes for a non-NULL value of the type with id `type_id` and no extra info:
///
/// ```text
/// field 100 (type) { field 100 (id): the id, end }, field 101 (is_null): 0,
/// field 102 (value): signed LEB128, end
/// ```
///
/// where a field is its id as two little-endian bytes, `end` is `0xFFFF`, and every type id
/// fits one LEB128 byte (is below 128). `None` for any other bytes.
pub fn integer(bytes: &[u8], type_id: u8) -> Option<i64> {
    if type_id >= 0x80 {
        return None;
    }
    let rest = bytes.strip_prefix(&[100, 0, 100, 0, type_id, 0xFF, 0xFF, 101, 0, 0, 102, 0])?;
    let (value, used) = sleb128(rest)?;
    (rest[used..] == [0xFF, 0xFF]).then_some(value)
}

/// DuckDB's `LogicalTypeId::BLOB`: the id `duckdb_types` names too, which the extension checks
/// against DuckDB's enum.
const BLOB: u8 = 26;

/// The bytes of a non-NULL BLOB value DuckDB's `BinarySerializer` wrote (`bytes`): field 100
/// (the type, id 26, no extra info), field 101 (not NULL), field 102 (the value as
/// `Blob::ToString` writes it: a length, then text in which every byte but printable ASCII
/// other than `\`, `'` and `"` is `\xHH`), the end. `None` for bytes of another layout or a
/// broken escape; it does not insist that every byte DuckDB would escape was escaped.
pub fn blob(bytes: &[u8]) -> Option<Vec<u8>> {
    let rest = bytes.strip_prefix(&[100, 0, 100, 0, BLOB, 0xFF, 0xFF, 101, 0, 0, 102, 0])?;
    let (len, used) = uleb128(rest)?;
    let text = rest.get(used..used.checked_add(usize::try_from(len).ok()?)?)?;
    if rest[used + text.len()..] != [0xFF, 0xFF] {
        return None;
    }
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\\' {
            let hex = std::str::from_utf8(text.get(i + 2..i + 4)?).ok()?;
            if text.get(i + 1) != Some(&b'x') {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 4;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    Some(out)
}

/// An unsigned LEB128 at the start of `bytes`, and how many bytes it took.
fn uleb128(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// DuckDB's serialized `LogicalType` of the type with id `type_id` (below 128) and no extra
/// info: field 100 (the id, one LEB128 byte), then the end marker.
pub fn type_blob(type_id: u8) -> Vec<u8> {
    vec![100, 0, type_id, 0xFF, 0xFF]
}

/// The bytes [`integer`] reads: what DuckDB's `BinarySerializer` writes for the non-NULL value
/// `v` of the type with id `type_id` (below 128) and no extra info that DuckDB holds as an
/// integer.
pub fn value(type_id: u8, v: i64) -> Vec<u8> {
    let mut out = vec![100, 0, 100, 0, type_id, 0xFF, 0xFF, 101, 0, 0, 102, 0];
    let mut v = v;
    loop {
        let byte = (v & 0x7F) as u8;
        v >>= 7;
        let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0);
        out.push(if done { byte } else { byte | 0x80 });
        if done {
            break;
        }
    }
    out.extend([0xFF, 0xFF]);
    out
}

/// A signed LEB128 at the start of `bytes`, and how many bytes it took; `None` when it runs
/// past the end or past 64 bits.
fn sleb128(bytes: &[u8]) -> Option<(i64, usize)> {
    let mut bits = 0u64;
    let mut shift = 0u32;
    for (i, &byte) in bytes.iter().enumerate() {
        if shift >= 64 {
            return None;
        }
        bits |= u64::from(byte & 0x7F) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            if shift < 64 && byte & 0x40 != 0 {
                bits |= !0u64 << shift;
            }
            return Some((bits as i64, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serialized(type_id: u8, v: i64) -> Vec<u8> {
        value(type_id, v)
    }

    #[test]
    fn reads_the_integer_of_the_layout_duckdb_writes() {
        const TIMESTAMP_TZ: u8 = 32;
        for v in [
            0,
            1,
            -1,
            63,
            64,
            -64,
            -65,
            1_733_000_000_000_000,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(
                integer(&serialized(TIMESTAMP_TZ, v), TIMESTAMP_TZ),
                Some(v),
                "{v}"
            );
        }
    }

    #[test]
    fn anything_else_is_left_to_duckdb() {
        let good = serialized(32, 5);
        // another type, a NULL, trailing or missing bytes, a type with extra info
        assert_eq!(integer(&good, 31), None);
        let mut null = good.clone();
        null[9] = 1;
        assert_eq!(integer(&null, 32), None);
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(integer(&longer, 32), None);
        assert_eq!(integer(&good[..good.len() - 1], 32), None);
        let mut extra = good.clone();
        extra.splice(5..5, [101, 0]);
        assert_eq!(integer(&extra, 32), None);
        // a value longer than 64 bits, and one cut short
        let mut wide = vec![100, 0, 100, 0, 32, 0xFF, 0xFF, 101, 0, 0, 102, 0];
        wide.extend([0x80; 10]);
        wide.extend([0x01, 0xFF, 0xFF]);
        assert_eq!(integer(&wide, 32), None);
        assert_eq!(
            integer(
                &[100, 0, 100, 0, 32, 0xFF, 0xFF, 101, 0, 0, 102, 0, 0x80],
                32
            ),
            None
        );
        assert_eq!(integer(&[], 32), None);
        assert_eq!(integer(&good, 200), None);
    }

    #[test]
    fn reads_the_bytes_of_a_blob_value() {
        let value = |text: &[u8]| {
            let mut out = vec![
                100,
                0,
                100,
                0,
                26,
                0xFF,
                0xFF,
                101,
                0,
                0,
                102,
                0,
                text.len() as u8,
            ];
            out.extend(text);
            out.extend([0xFF, 0xFF]);
            out
        };
        assert_eq!(blob(&value(b"plain")), Some(b"plain".to_vec()));
        // "é" (C3 A9) and a backslash, as Blob::ToString escapes them
        assert_eq!(
            blob(&value(b"caf\\xC3\\xA9 \\x5C")),
            Some("café \\".as_bytes().to_vec())
        );
        assert_eq!(blob(&value(b"bad \\xZZ")), None);
        assert_eq!(blob(&value(b"cut \\x4")), None);
        let mut varchar = value(b"x");
        varchar[4] = 25;
        assert_eq!(blob(&varchar), None);
    }
}
