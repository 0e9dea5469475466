//! The committed head of a lake (`sys/head`): the record every commit advances, and the name of
//! one committed state.

use crate::cell::{decode_row, encode_row, Cell};
use crate::error::{Error, Result};

/// The committed head of the lake (`sys/head`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Head {
    /// The latest committed DuckLake snapshot id; `None` for a lake with no snapshot yet.
    pub snapshot_id: Option<i64>,
    /// How many batches have been committed. Every commit advances it, maintenance commits
    /// (which mint no snapshot) included, so it names a committed state exactly.
    pub batch_count: u64,
}

impl Head {
    pub fn encode(&self) -> Vec<u8> {
        encode_row(&[
            self.snapshot_id.map(Cell::Int).unwrap_or(Cell::Null),
            Cell::Int(self.batch_count as i64),
        ])
    }

    pub fn decode(bytes: &[u8]) -> Result<Head> {
        let row = decode_row(bytes)?;
        match row.as_slice() {
            [snap, Cell::Int(count)] if *count >= 0 => Ok(Head {
                snapshot_id: match snap {
                    Cell::Null => None,
                    Cell::Int(v) => Some(*v),
                    _ => {
                        return Err(Error::Corrupt(
                            "sys/head holds a non-integer snapshot id".into(),
                        ))
                    }
                },
                batch_count: *count as u64,
            }),
            _ => Err(Error::Corrupt("sys/head is malformed".into())),
        }
    }
}
