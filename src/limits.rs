//! How much one commit may write (`moraine_max_commit_size`), and the check that holds it.
//!
//! Every byte a commit writes goes through SlateDB as one batch, into one WAL object, and into
//! the commit's log record (`image/log`, which repeats its keys and values), so the size of the
//! largest commit bounds every key, value, inlined chunk and log record moraine ever writes.
//! The ceiling, [`MAX_COMMIT_BYTES`], keeps all of them far inside what the layers below take:
//! SlateDB asserts (panics) on a key or value of 4 GiB or more, and an inlined chunk's text or
//! blob column holds less than 2 GiB (Arrow's 32-bit offsets). A commit over the limit is refused
//! before anything is written.

use crate::error::{Error, Result};
use crate::keys;

/// The most a commit may write, and `moraine_max_commit_size`'s default: 1 GiB.
pub const MAX_COMMIT_BYTES: u64 = 1 << 30;

/// `moraine_max_commit_size`'s default, as the setting shows it.
pub const DEFAULT_MAX_COMMIT_SIZE: &str = "1GiB";

/// A size as DuckDB spells memory limits: a number, optionally followed by a unit (B, KB, MB,
/// GB are powers of 1000; KiB, MiB, GiB of 1024), case-insensitive.
pub fn parse_size(text: &str) -> Result<u64> {
    let bad = || {
        Error::InvalidInput(format!(
            "moraine_max_commit_size '{text}' is not a size; write e.g. '64MiB', '500MB' or \
             '1GiB' (at most {DEFAULT_MAX_COMMIT_SIZE})"
        ))
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "byte" | "bytes" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    let bytes = number * scale as f64;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(bad());
    }
    if bytes > MAX_COMMIT_BYTES as f64 {
        return Err(Error::InvalidInput(format!(
            "moraine_max_commit_size '{text}' is more than moraine writes in one commit \
             ({DEFAULT_MAX_COMMIT_SIZE}: SlateDB takes no key or value of 4 GiB, and an inlined \
             column holds less than 2 GiB)"
        )));
    }
    Ok(bytes as u64)
}

/// The `max_commit_size` option (from `moraine_max_commit_size`), else [`MAX_COMMIT_BYTES`].
pub(crate) fn max_commit_option(options: &[(String, String)]) -> Result<u64> {
    match options.iter().find(|(k, _)| k == "max_commit_size") {
        None => Ok(MAX_COMMIT_BYTES),
        Some((_, v)) => parse_size(v),
    }
}

/// `n` bytes, for messages.
pub(crate) fn show_size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / (1u64 << 10) as f64),
        n => format!("{n} bytes"),
    }
}

/// What a commit's writes come to: their bytes (keys and values), and the largest record.
pub(crate) struct CommitSize<'a> {
    pub(crate) bytes: u64,
    largest: (&'a [u8], u64),
}

impl<'a> CommitSize<'a> {
    pub(crate) fn of(writes: impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>) -> Self {
        let mut size = CommitSize {
            bytes: 0,
            largest: (&[], 0),
        };
        for (k, v) in writes {
            let record = (k.len() + v.as_ref().map_or(0, Vec::len)) as u64;
            size.bytes += record;
            if record > size.largest.1 || size.largest.0.is_empty() {
                size.largest = (k, record);
            }
        }
        size
    }

    /// Refuses the commit when its writes and log record (`log_bytes`) come to more than
    /// `limit`, naming the table of its largest record.
    pub(crate) fn check(&self, log_bytes: usize, limit: u64) -> Result<()> {
        let total = self.bytes + log_bytes as u64;
        if total <= limit {
            return Ok(());
        }
        let (key, size) = self.largest;
        Err(Error::InvalidInput(format!(
            "this commit would write {} to the catalog, more than moraine_max_commit_size ({}); \
             its largest record is {} of {}. Nothing was written. Values this large belong in \
             data files: lower DuckLake's data_inlining_row_limit for the table, or write fewer \
             rows per transaction. A catalog copied in (COPY FROM DATABASE) is one commit, and \
             one this large cannot be copied yet (RFC 0014)",
            show_size(total),
            show_size(limit),
            show_size(size),
            table_of(key),
        )))
    }
}

/// The table (or keyspace) a key belongs to, for messages.
fn table_of(key: &[u8]) -> String {
    match keys::decode_key(key) {
        Ok(cells) => {
            let text: Vec<String> = cells
                .iter()
                .filter_map(|c| match c {
                    crate::cell::Cell::Text(s) => Some(s.clone()),
                    _ => None,
                })
                .collect();
            match text.as_slice() {
                [space, table, ..] if space == "lake" => text.get(3).unwrap_or(table).clone(),
                [_, table, ..] => table.clone(),
                [space] => space.clone(),
                [] => "a record".into(),
            }
        }
        Err(_) => "a record".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_duckdb_spells_them_and_the_ceiling_holds() {
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size(" 64 mib ").unwrap(), 64 << 20);
        assert_eq!(parse_size("500MB").unwrap(), 500_000_000);
        assert_eq!(parse_size("1.5KB").unwrap(), 1_500);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        for bad in ["", "lots", "-1MB", "0", "1 parsec", "2GiB", "1e12"] {
            let e = parse_size(bad).unwrap_err();
            assert_eq!(e.kind(), crate::error::Kind::InvalidInput, "{bad}");
            assert!(e.to_string().contains(&format!("'{bad}'")), "{e}");
        }
        assert_eq!(
            parse_size(DEFAULT_MAX_COMMIT_SIZE).unwrap(),
            MAX_COMMIT_BYTES
        );
    }

    #[test]
    fn an_oversized_commit_names_its_largest_record() {
        let small = (
            keys::encode_key(&[
                crate::cell::Cell::Text("current".into()),
                crate::cell::Cell::Text("ducklake_table".into()),
            ]),
            Some(vec![0u8; 10]),
        );
        let big = (
            keys::encode_key(&[
                crate::cell::Cell::Text("inline".into()),
                crate::cell::Cell::Text("ducklake_inlined_data_1_1".into()),
            ]),
            Some(vec![0u8; 3 << 20]),
        );
        let writes = [small.clone(), big];
        let size = CommitSize::of(writes.iter().map(|(k, v)| (k, v)));
        assert_eq!(
            size.bytes,
            (writes[0].0.len() + 10 + writes[1].0.len() + (3 << 20)) as u64
        );
        assert!(size.check(0, 4 << 20).is_ok());
        let e = size.check(2 << 20, 4 << 20).unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::InvalidInput);
        let m = e.to_string();
        assert!(
            m.contains("ducklake_inlined_data_1_1") && m.contains("4.0 MiB"),
            "{m}"
        );
        let one = [small];
        assert!(CommitSize::of(one.iter().map(|(k, v)| (k, v)))
            .check(0, 10)
            .is_err());
    }
}
