//! How the store compresses what it writes (RFC 0013): SlateDB's blocks (its tables and WAL
//! objects) and the sections of moraine's image checkpoints, with one codec a writer takes from
//! `moraine_compression` at ATTACH. Each SST block and each checkpoint section records the
//! codec it was written with, so a store holds objects of several codecs and any build reads
//! them all.

use crate::error::{Error, Result};
use bytes::Bytes;
use std::borrow::Cow;

/// A codec: `none`, `lz4` or `zstd` (at level 3, SlateDB's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Lz4,
    Zstd,
}

/// `moraine_compression`'s default (RFC 0013 gives the numbers it was chosen by).
pub const DEFAULT: Codec = Codec::Zstd;

impl Default for Codec {
    fn default() -> Codec {
        DEFAULT
    }
}

/// zstd's level for checkpoint sections: the one SlateDB compresses its blocks at.
const ZSTD_LEVEL: i32 = 3;

impl Codec {
    /// The codec `text` names (`none`, `lz4`, `zstd`; any case, spaces around ignored).
    pub fn parse(text: &str) -> Result<Codec> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Codec::None),
            "lz4" => Ok(Codec::Lz4),
            "zstd" => Ok(Codec::Zstd),
            _ => Err(Error::InvalidInput(format!(
                "moraine_compression '{text}' is not a codec moraine writes; use 'zstd', 'lz4' \
                 or 'none'"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    /// The codec of SlateDB's settings that writes blocks this way.
    pub(crate) fn slatedb(self) -> Option<slatedb::config::CompressionCodec> {
        match self {
            Codec::None => None,
            Codec::Lz4 => Some(slatedb::config::CompressionCodec::Lz4),
            Codec::Zstd => Some(slatedb::config::CompressionCodec::Zstd),
        }
    }

    /// The byte a checkpoint section records its codec with.
    pub(crate) fn tag(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Lz4 => 1,
            Codec::Zstd => 2,
        }
    }

    pub(crate) fn from_tag(tag: u8) -> Option<Codec> {
        match tag {
            0 => Some(Codec::None),
            1 => Some(Codec::Lz4),
            2 => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// `raw` compressed (`raw` itself, not a copy, for `none`).
    pub(crate) fn compress(self, raw: &[u8]) -> Cow<'_, [u8]> {
        match self {
            Codec::None => Cow::Borrowed(raw),
            Codec::Lz4 => Cow::Owned(lz4_flex::block::compress(raw)),
            // (compressing into memory fails only where allocating would)
            Codec::Zstd => Cow::Owned(
                zstd::bulk::compress(raw, ZSTD_LEVEL).expect("zstd compresses in memory"),
            ),
        }
    }

    /// What `stored` holds, which must be `raw_len` bytes (`stored` itself, not a copy, for
    /// `none`); `what` names it in errors.
    pub(crate) fn decompress(self, stored: &Bytes, raw_len: usize, what: &str) -> Result<Bytes> {
        // lz4 allocates the length it is told before decoding: a length no lz4 block of these
        // bytes can reach (its ratio is at most 255) is damage, never an allocation
        if self == Codec::Lz4 && raw_len > stored.len().saturating_mul(255).saturating_add(16) {
            return Err(Error::Corrupt(format!(
                "{what} records {raw_len} bytes, more than {} lz4 bytes can hold",
                stored.len()
            )));
        }
        let raw = match self {
            Codec::None => Ok(stored.clone()),
            Codec::Lz4 => lz4_flex::block::decompress(stored, raw_len)
                .map(Bytes::from)
                .map_err(|e| e.to_string()),
            Codec::Zstd => zstd::bulk::decompress(stored, raw_len)
                .map(Bytes::from)
                .map_err(|e| e.to_string()),
        }
        .map_err(|e| {
            Error::Corrupt(format!("{what} does not decompress ({}: {e})", self.name()))
        })?;
        if raw.len() != raw_len {
            return Err(Error::Corrupt(format!(
                "{what} decompresses to {} bytes, not the {raw_len} it records",
                raw.len()
            )));
        }
        Ok(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_names_parse() {
        let raw: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
            let stored = Bytes::from(codec.compress(&raw).into_owned());
            if codec != Codec::None {
                assert!(stored.len() < raw.len() / 4, "{codec:?}: {}", stored.len());
            }
            assert_eq!(codec.decompress(&stored, raw.len(), "x").unwrap(), raw);
            // a wrong length, or damage, is refused, never taken
            assert!(codec.decompress(&stored, raw.len() + 1, "x").is_err());
            assert_eq!(Codec::from_tag(codec.tag()), Some(codec));
            assert_eq!(
                Codec::parse(&format!(" {} ", codec.name().to_uppercase())).unwrap(),
                codec
            );
        }
        let damaged = Bytes::from_static(b"not zstd");
        assert!(Codec::Zstd.decompress(&damaged, 8, "x").is_err());
        // a length no stored bytes can reach is refused before anything is allocated
        for codec in [Codec::Lz4, Codec::Zstd] {
            let stored = Bytes::from(codec.compress(b"a few bytes").into_owned());
            assert!(codec.decompress(&stored, 1 << 50, "x").is_err());
        }
        assert_eq!(Codec::from_tag(3), None);
        let e = Codec::parse("gzip").unwrap_err().to_string();
        assert!(
            e.contains("moraine_compression 'gzip'") && e.contains("'zstd'"),
            "{e}"
        );
    }
}
