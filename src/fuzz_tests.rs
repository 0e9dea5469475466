//! Fuzzed decoders (issue 11): every decoder that reads bytes from storage meets hostile bytes.
//!
//! Each target starts from valid encodings of random values and feeds the decoder those and
//! mutations of them (bit flips, random bytes, truncations, extensions, repeated spans, planted
//! huge lengths), plus buffers of random bytes. The properties: no decoder panics, aborts or
//! hangs (a case that did would stop the test); a valid encoding decodes to what was encoded;
//! and where two decoders read the same bytes they agree.
//!
//! The number of cases per target is `MORAINE_FUZZ_CASES` (default 3,000, the test command's
//! bounded run); the seed is `MORAINE_FUZZ_SEED` (default fixed, so a failure reproduces). A
//! failing case prints its target, seed, case number and input.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;

use crate::catalog::{ColumnDef, SnapshotRecord, TableDef};
use crate::cell::{self, Cell, Row};
use crate::checkpoint;
use crate::chunk;
use crate::compression::Codec;
use crate::head::Head;
use crate::keys;

/// xorshift64*: small, fast and reproducible; no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn text(&mut self, max: usize) -> String {
        const ALPHABET: &[&str] = &["a", "Z", "0", "_", " ", "/", "\0", "é", "😀", "\u{2060}"];
        let n = self.below(max + 1);
        (0..n)
            .map(|_| ALPHABET[self.below(ALPHABET.len())])
            .collect()
    }
    fn int(&mut self) -> i64 {
        match self.below(4) {
            0 => self.below(10) as i64 - 5,
            1 => [i64::MIN, i64::MAX, 0, -1, 1 << 32][self.below(5)],
            _ => self.next() as i64,
        }
    }
    fn cell(&mut self) -> Cell {
        match self.below(6) {
            0 => Cell::Null,
            1 => Cell::Int(self.int()),
            2 => Cell::Bool(self.chance(2)),
            3 => Cell::Float(f64::from_bits(self.next())),
            4 => Cell::Text(self.text(12)),
            _ => Cell::Blob(self.bytes(12)),
        }
    }
    fn row(&mut self, max: usize) -> Row {
        let n = self.below(max + 1);
        (0..n).map(|_| self.cell()).collect()
    }
}

/// A copy of `input` with one to four mutations.
fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            2 => {
                let n = rng.below(b.len() + 1);
                b.truncate(n);
            }
            3 => {
                let extra = rng.bytes(8);
                let at = rng.below(b.len() + 1);
                b.splice(at..at, extra);
            }
            4 if !b.is_empty() => {
                let from = rng.below(b.len());
                let to = from + rng.below(b.len() - from + 1);
                let span = b[from..to].to_vec();
                let at = rng.below(b.len() + 1);
                b.splice(at..at, span);
            }
            5 => {
                // a planted length or count: all ones, or a huge varint
                let at = rng.below(b.len() + 1);
                let planted: &[u8] = if rng.chance(2) {
                    &[0xff, 0xff, 0xff, 0xff]
                } else {
                    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
                };
                b.splice(at..at, planted.iter().copied());
            }
            _ => {
                b = rng.bytes(24);
            }
        }
    }
    b
}

fn cases() -> usize {
    std::env::var("MORAINE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000)
}

fn seed(target: &str) -> u64 {
    let base = std::env::var("MORAINE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6d6f_7261_696e_65_u64);
    // each target its own stream, nonzero
    target
        .bytes()
        .fold(base, |h, c| h.rotate_left(5) ^ c as u64)
        | 1
}

/// Runs `case` for every case of `target`: `make` builds a valid value and its encoding,
/// `check` is handed the valid encoding (with `true`) and then a mutated one.
fn fuzz<T>(
    target: &str,
    mut make: impl FnMut(&mut Rng) -> (T, Vec<u8>),
    mut check: impl FnMut(&T, &[u8], bool),
) {
    let seed = seed(target);
    let mut rng = Rng(seed);
    for case in 0..cases() {
        let (value, valid) = make(&mut rng);
        let hostile = if rng.chance(8) {
            rng.bytes(64)
        } else {
            mutate(&mut rng, &valid)
        };
        for (input, is_valid) in [(&valid, true), (&hostile, false)] {
            let run = catch_unwind(AssertUnwindSafe(|| check(&value, input, is_valid)));
            if let Err(panic) = run {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!(
                    "fuzz target {target} (MORAINE_FUZZ_SEED default, target seed {seed:#x}), \
                     case {case}, {} input {input:02x?}: {what}",
                    if is_valid { "valid" } else { "mutated" }
                );
            }
        }
    }
}

#[test]
fn keys_decode_or_refuse() {
    fuzz(
        "keys",
        |rng| {
            // floats are left out: NaN payloads re-encode as themselves but compare unequal
            let cells: Vec<Cell> = rng
                .row(5)
                .into_iter()
                .filter(|c| !matches!(c, Cell::Float(_)))
                .collect();
            let encoded = keys::encode_key(&cells);
            (cells, encoded)
        },
        |cells, input, valid| {
            let decoded = keys::decode_key(input);
            if valid {
                assert_eq!(decoded.as_ref().ok(), Some(cells), "{decoded:?}");
            }
            if let Ok(decoded) = decoded {
                // what decodes, re-encodes to the same bytes (keys order the store)
                assert_eq!(keys::encode_key(&decoded), input);
                for max in 0..=decoded.len() {
                    let (lead, len) = keys::decode_leading(input, max).expect("a prefix decodes");
                    assert_eq!(lead[..], decoded[..max.min(decoded.len())]);
                    // the undecoded segments are those cells, encoded
                    let raw = keys::raw_segments(input, max).expect("a prefix splits");
                    assert_eq!(raw.len(), lead.len());
                    assert_eq!(raw.concat(), &input[..len]);
                    for (segment, cell) in raw.iter().zip(&lead) {
                        assert_eq!(*segment, keys::encode_key(std::slice::from_ref(cell)));
                        if let Cell::Text(t) = cell {
                            assert!(keys::segment_is_text(segment, t) || t.contains('\0'));
                        }
                    }
                }
            }
        },
    );
}

#[test]
fn row_records_decode_or_refuse_and_agree_cell_by_cell() {
    fuzz(
        "records",
        |rng| {
            let row = rng.row(8);
            let encoded = if rng.chance(2) {
                cell::encode_row(&row)
            } else {
                cell::encode_row_at(&row, (rng.next(), rng.next()))
            };
            (row, encoded)
        },
        |row, input, valid| {
            let decoded = cell::decode_row_at(input);
            if valid {
                let same = decoded.as_ref().map(|(r, _)| same_cells(r, row));
                assert_eq!(same.ok(), Some(true), "{decoded:?}");
            }
            match decoded {
                Ok((decoded, _)) => {
                    for (i, c) in decoded.iter().enumerate() {
                        let at = cell::cell_at(input, i).expect("a decodable record reads by cell");
                        assert!(same_cells(&[at.expect("in range").to_cell()], &[c.clone()]));
                    }
                    assert_eq!(cell::cell_at(input, decoded.len()).ok(), Some(None));
                }
                Err(e) => {
                    assert!(matches!(e, crate::error::Error::Corrupt(_)), "{e:?}");
                    // the record walker refuses it as well (cell_at reads a prefix only, so it
                    // may answer for the cells before the damage)
                    assert!(cell::walk_row(input, |_, _| {}).is_err());
                }
            }
        },
    );
}

#[test]
fn inline_chunks_decode_or_refuse() {
    fuzz(
        "chunks",
        |rng| {
            let ncols = 1 + rng.below(3);
            let columns: Vec<String> = (0..ncols).map(|i| format!("c{i}")).collect();
            // a column holds one type (or NULLs), as DuckDB's inlined tables do
            let kinds: Vec<usize> = (0..ncols).map(|_| rng.below(5)).collect();
            let rows: Vec<Row> = (0..rng.below(4))
                .map(|_| {
                    kinds
                        .iter()
                        .map(|k| {
                            if rng.chance(4) {
                                return Cell::Null;
                            }
                            match k {
                                0 => Cell::Int(rng.int()),
                                1 => Cell::Bool(rng.chance(2)),
                                2 => Cell::Float(rng.below(1000) as f64 / 8.0),
                                3 => Cell::Text(rng.text(6)),
                                _ => Cell::Blob(rng.bytes(6)),
                            }
                        })
                        .collect()
                })
                .collect();
            let encoded = chunk::encode_chunk("t", &columns, &rows).expect("valid rows encode");
            (rows, encoded)
        },
        |rows, input, valid| {
            let decoded = chunk::decode_chunk(input);
            if let Ok(d) = &decoded {
                // whatever decodes is rows of one width, which encode and decode to themselves
                let width = d.first().map_or(0, |r| r.len());
                assert!(d.iter().all(|r| r.len() == width));
                if width > 0 {
                    let names: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
                    if let Ok(again) = chunk::encode_chunk("t", &names, d) {
                        let back = chunk::decode_chunk(&again).expect("re-encoded rows decode");
                        assert!(
                            back.len() == d.len()
                                && back.iter().zip(d).all(|(a, b)| same_cells(a, b))
                        );
                    }
                }
            }
            if valid {
                let same = decoded.as_ref().map(|d| {
                    d.len() == rows.len() && d.iter().zip(rows).all(|(a, b)| same_cells(a, b))
                });
                assert_eq!(same.ok(), Some(true), "{decoded:?}");
            }
        },
    );
}

#[test]
fn the_head_and_catalog_records_decode_or_refuse() {
    fuzz(
        "head",
        |rng| {
            let head = Head {
                snapshot_id: (!rng.chance(4)).then(|| rng.int()),
                batch_count: rng.next() >> 1,
            };
            let encoded = head.encode();
            (head, encoded)
        },
        |head, input, valid| {
            let decoded = Head::decode(input);
            if valid {
                assert_eq!(decoded.as_ref().ok(), Some(head));
            }
        },
    );
    fuzz(
        "table definitions",
        |rng| {
            let def = TableDef {
                schema: rng.text(6),
                name: rng.text(6),
                columns: (0..rng.below(4))
                    .map(|_| ColumnDef {
                        name: rng.text(5),
                        type_name: rng.text(5),
                        type_blob: rng.bytes(5),
                    })
                    .collect(),
            };
            let encoded = def.encode();
            (def, encoded)
        },
        |def, input, valid| {
            let decoded = TableDef::decode(input);
            if valid {
                assert_eq!(decoded.as_ref().ok(), Some(def));
            }
        },
    );
    fuzz(
        "snapshot records",
        |rng| {
            let record = SnapshotRecord {
                snapshot: (!rng.chance(3)).then(|| rng.row(4)),
                changes: (!rng.chance(3)).then(|| rng.row(4)),
            };
            let encoded = record.encode();
            (record, encoded)
        },
        |record, input, valid| {
            let decoded = SnapshotRecord::decode(input);
            if valid {
                let d = decoded.as_ref().expect("valid decodes");
                assert_eq!(d.snapshot.is_some(), record.snapshot.is_some());
                assert_eq!(d.changes.is_some(), record.changes.is_some());
            }
            for half in [
                crate::catalog::SnapshotHalf::Snapshot,
                crate::catalog::SnapshotHalf::Changes,
            ] {
                let whole = SnapshotRecord::half_record(&Bytes::copy_from_slice(input), half);
                // the half reader accepts exactly what the record decoder accepts
                assert_eq!(whole.is_ok(), decoded.is_ok(), "{whole:?} / {decoded:?}");
            }
        },
    );
}

#[test]
fn image_checkpoints_and_logs_decode_or_refuse() {
    fuzz(
        "checkpoints",
        |rng| {
            let head = Head {
                snapshot_id: Some(rng.int()),
                batch_count: rng.below(1000) as u64,
            };
            let sections: Vec<(Vec<u8>, checkpoint::StoredSection)> = (0..rng.below(3))
                .map(|i| {
                    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..rng.below(4))
                        .map(|_| (rng.bytes(6), rng.bytes(8)))
                        .collect();
                    let section = checkpoint::encode_section(
                        records.len(),
                        records.iter().map(|(k, v)| (&k[..], &v[..])),
                    );
                    (
                        vec![b'a' + i as u8],
                        checkpoint::StoredSection::raw(section),
                    )
                })
                .collect();
            let codec = [Codec::None, Codec::Lz4, Codec::Zstd][rng.below(3)];
            // the history ranges held, when the writer knew them
            let held = (rng.below(2) == 0).then(|| checkpoint::HeldRanges {
                roots: (0..rng.below(3)).map(|_| rng.bytes(5)).collect(),
                tables: (0..rng.below(4)).map(|_| rng.bytes(7)).collect(),
            });
            let encoded = checkpoint::encode_checkpoint(
                head,
                "moraine-store-x",
                held.as_ref(),
                sections.clone(),
                codec,
            );
            ((sections, held), encoded)
        },
        |(sections, held), input, valid| {
            let decoded = checkpoint::decode_checkpoint(Bytes::copy_from_slice(input), "fuzz");
            if valid {
                let d = decoded.as_ref().ok().expect("valid decodes");
                assert_eq!(&d.history_held, held);
                assert_eq!(d.sections.len(), sections.len());
                for (prefix, section) in sections {
                    let back = d.sections[prefix]
                        .decompressed()
                        .expect("valid decompresses");
                    assert_eq!(back, section.bytes);
                }
            }
            if let Ok(d) = decoded {
                for section in d.sections.values() {
                    if let Ok(raw) = section.decompressed() {
                        let _ = checkpoint::decode_section(&raw);
                    }
                }
            }
            let _ = checkpoint::decode_section(&Bytes::copy_from_slice(input));
        },
    );
    fuzz(
        "logs",
        |rng| {
            let batch = rng.below(1000) as u64;
            let head = Head {
                snapshot_id: None,
                batch_count: batch,
            };
            let writes: checkpoint::Writes = (0..rng.below(4))
                .map(|_| (rng.bytes(6), (!rng.chance(3)).then(|| rng.bytes(8))))
                .collect::<BTreeMap<_, _>>();
            let encoded = checkpoint::encode_log(head, &writes);
            ((batch, writes), encoded)
        },
        |(batch, writes), input, valid| {
            let decoded = checkpoint::decode_log(&Bytes::copy_from_slice(input), *batch);
            if valid {
                assert_eq!(decoded.as_ref().ok().map(|(_, w)| w), Some(writes));
            }
        },
    );
    fuzz(
        "checkpoint pointers",
        |rng| {
            let batch = rng.next() >> 1;
            let path = rng.text(10);
            let encoded = checkpoint::encode_pointer(batch, &path);
            ((batch, path), encoded)
        },
        |value, input, valid| {
            let decoded = checkpoint::decode_pointer(input);
            if valid {
                assert_eq!(decoded.as_ref().ok(), Some(value));
            }
        },
    );
}

/// Cells equal, floats by their bits (NaN is not equal to itself).
fn same_cells(a: &[Cell], b: &[Cell]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Cell::Float(x), Cell::Float(y)) => x.to_bits() == y.to_bits(),
            _ => x == y,
        })
}
