//! Image checkpoints and the commit log (RFC 0009): how an attach reads a store's committed
//! image without walking every record, and how a reader follows the writer commit by commit.
//!
//! - A *checkpoint* is one object beside SlateDB's (`moraine/image/<batch>`) holding every live
//!   record of the image at one head, grouped by space. A writer writes one every
//!   [`COMMITS_PER_CHECKPOINT`] commits and when it closes, and records it in
//!   `image/checkpoint`.
//! - Every commit also writes `image/log/<batch>`: its writes and the head they made, in the same
//!   SlateDB batch as the commit itself. A checkpoint deletes the records up to the checkpoint
//!   it replaces, and records expire after [`LOG_TTL`] in any case; a checkpoint is written long
//!   before ([`CHECKPOINT_AGE`]), so an attach reads the newest checkpoint and the few log
//!   records after it. A missing record (expired, or a commit older than the log) is never guessed at: the
//!   image is then read from the records themselves, as before checkpoints.
//!
//! Both formats carry their own framing; a checkpoint ends with a CRC-32 of everything before
//! it, so a damaged object is refused (and the image read from the records instead).

use crate::cell::{decode_row, encode_row, Cell};
use crate::compression::Codec;
use crate::error::{Error, Result};
use crate::head::Head;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::Duration;

/// A writer writes a checkpoint after this many commits since its last one, or at its first
/// commit [`CHECKPOINT_AGE`] after the first commit its last one does not hold.
pub(crate) const COMMITS_PER_CHECKPOINT: u64 = 64;
pub(crate) const CHECKPOINT_AGE: Duration = Duration::from_secs(15 * 60);

/// How long a commit's log record lives: far longer than a checkpoint takes to come, so that
/// only a writer idle for a day with commits no checkpoint holds (it writes one when it
/// closes) leaves an attach to read the records.
pub(crate) const LOG_TTL: Duration = Duration::from_secs(24 * 3600);

/// The checkpoint format this build writes (sections compressed, an index at the end that names
/// the store format it was written in), and the ones before, which it reads.
const MAGIC: &[u8] = b"moraine-image-3\n";
/// As this build's, without the store format in its index.
const MAGIC_2: &[u8] = b"moraine-image-2\n";
const MAGIC_1: &[u8] = b"moraine-image-1\n";

/// The object a checkpoint of batch `batch` is written to.
pub(crate) fn object_path(batch: u64) -> String {
    format!("moraine/image/{batch:020}")
}

/// The directory checkpoint objects live in.
pub(crate) const OBJECT_DIR: &str = "moraine/image";

/// The batch a checkpoint object's name holds, if it is one.
pub(crate) fn batch_of_object(name: &str) -> Option<u64> {
    name.strip_prefix(OBJECT_DIR)?
        .strip_prefix('/')?
        .parse()
        .ok()
}

/// The value of `image/checkpoint`: the batch of the newest checkpoint and its object.
pub(crate) fn encode_pointer(batch: u64, path: &str) -> Vec<u8> {
    encode_row(&[Cell::Int(batch as i64), Cell::Text(path.to_string())])
}

pub(crate) fn decode_pointer(value: &[u8]) -> Result<(u64, String)> {
    match decode_row(value)?.as_slice() {
        [Cell::Int(b), Cell::Text(p)] if *b >= 0 => Ok((*b as u64, p.clone())),
        _ => Err(Error::Corrupt("image/checkpoint is malformed".into())),
    }
}

/// Appends `bytes` with a u32 length before it.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads framed fields from a buffer, naming `what` in its errors.
struct Reader<'a> {
    buf: &'a Bytes,
    at: usize,
    what: &'a str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a Bytes, what: &'a str) -> Self {
        Reader { buf, at: 0, what }
    }

    fn short(&self) -> Error {
        Error::Corrupt(format!("{} ends early (at byte {})", self.what, self.at))
    }

    fn take(&mut self, n: usize) -> Result<Bytes> {
        let end = self.at.checked_add(n).ok_or_else(|| self.short())?;
        if end > self.buf.len() {
            return Err(self.short());
        }
        let out = self.buf.slice(self.at..end);
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes(b[..].try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b[..].try_into().expect("8 bytes")))
    }

    fn bytes(&mut self) -> Result<Bytes> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// `n` framed fields.
    fn list(&mut self, n: u32) -> Result<Vec<Vec<u8>>> {
        (0..n).map(|_| Ok(self.bytes()?.to_vec())).collect()
    }

    fn done(&self) -> bool {
        self.at == self.buf.len()
    }
}

/// One space's records as a checkpoint holds them: a count, then each key and value. `count`
/// is how many `records` yields.
pub(crate) fn encode_section<'a>(
    count: usize,
    records: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&(count as u32).to_le_bytes());
    let mut written = 0;
    for (k, v) in records {
        put_bytes(&mut out, k);
        put_bytes(&mut out, v);
        written += 1;
    }
    debug_assert_eq!(written, count);
    Bytes::from(out)
}

/// The records of a section, in the order written (key order); values share its buffer.
pub(crate) fn decode_section(section: &Bytes) -> Result<Vec<(Vec<u8>, Bytes)>> {
    let mut r = Reader::new(section, "an image checkpoint section");
    let n = r.u32()? as usize;
    let mut out = Vec::with_capacity(n.min(section.len() / 8));
    for _ in 0..n {
        let k = r.bytes()?;
        let v = r.bytes()?;
        out.push((k.to_vec(), v));
    }
    if !r.done() {
        return Err(Error::Corrupt(
            "an image checkpoint section has bytes after its records".into(),
        ));
    }
    Ok(out)
}

/// How many records a raw section holds.
fn section_len(section: &Bytes) -> usize {
    section.get(..4).map_or(0, |b| {
        u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize
    })
}

/// A section as a checkpoint stores it: compressed with `codec` into `bytes`, `raw_len` bytes
/// once decompressed (RFC 0013). Sections written before compression are stored raw.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoredSection {
    pub codec: Codec,
    pub raw_len: usize,
    /// How many records it holds.
    pub records: usize,
    pub bytes: Bytes,
}

impl StoredSection {
    /// A section stored as it is.
    pub(crate) fn raw(bytes: Bytes) -> StoredSection {
        StoredSection {
            codec: Codec::None,
            raw_len: bytes.len(),
            records: section_len(&bytes),
            bytes,
        }
    }

    /// This section compressed with `codec`, unless it is compressed already (a section of an
    /// earlier checkpoint that no commit changed is copied as it is stored).
    pub(crate) fn compressed(self, codec: Codec) -> StoredSection {
        if self.codec != Codec::None || codec == Codec::None {
            return self;
        }
        StoredSection {
            codec,
            bytes: Bytes::from(codec.compress(&self.bytes).into_owned()),
            ..self
        }
    }

    /// The section's records as [`encode_section`] wrote them (a raw section's own bytes).
    pub(crate) fn decompressed(&self) -> Result<Bytes> {
        let what = "an image checkpoint section";
        let raw = self.codec.decompress(&self.bytes, self.raw_len, what)?;
        if section_len(&raw) != self.records {
            return Err(Error::Corrupt(format!(
                "{what} holds {} records, its index says {}",
                section_len(&raw),
                self.records
            )));
        }
        Ok(raw)
    }
}

/// A checkpoint read back: the head it was taken at and its spaces' sections.
pub(crate) struct Checkpoint {
    pub head: Head,
    /// The store format (`sys/format`) of the store it was written in; `None` in a checkpoint
    /// of an earlier format, which does not say.
    pub store_format: Option<String>,
    /// Which history ranges held ended versions at its head, when its writer knew.
    pub history_held: Option<HeldRanges>,
    pub sections: BTreeMap<Vec<u8>, StoredSection>,
}

/// The history ranges of a committed state that hold at least one ended version (RFC 0009):
/// the history roots looked through, and the table ranges under them found holding a record.
/// A range not named under a root looked through holds nothing, so a reader that starts from
/// a checkpoint reads a table's history from SlateDB only when the table's range is named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HeldRanges {
    pub roots: Vec<Vec<u8>>,
    pub tables: Vec<Vec<u8>>,
}

/// Marks a checkpoint whose writer did not know which history ranges hold records.
const HELD_UNKNOWN: u32 = u32::MAX;

fn put_list(out: &mut Vec<u8>, list: &[Vec<u8>]) {
    out.extend_from_slice(&(list.len() as u32).to_le_bytes());
    for item in list {
        put_bytes(out, item);
    }
}

/// A checkpoint object (`moraine-image-3`): magic; each section's stored bytes; an index (the
/// head, the store format it was written in, then per section its space prefix, codec, offset, stored and raw length, record count
/// and the CRC-32 of its stored bytes); the index's length and CRC-32. The index at the end lets a
/// reader fetch it and then one section by a ranged read. Sections stored raw are compressed
/// with `codec`; sections stored compressed are written as they are. The store format lets an
/// attach that reads the checkpoint before SlateDB (RFC 0009) know it reads this store's layout.
pub(crate) fn encode_checkpoint(
    head: Head,
    store_format: &str,
    history_held: Option<&HeldRanges>,
    sections: Vec<(Vec<u8>, StoredSection)>,
    codec: Codec,
) -> Vec<u8> {
    encode_checkpoint_as(head, Some((store_format, history_held)), sections, codec)
}

/// [`encode_checkpoint`], or without a store format the format before (`moraine-image-2`, which
/// tests write as an earlier build did).
fn encode_checkpoint_as(
    head: Head,
    store_format: Option<(&str, Option<&HeldRanges>)>,
    sections: Vec<(Vec<u8>, StoredSection)>,
    codec: Codec,
) -> Vec<u8> {
    let sections: Vec<(Vec<u8>, StoredSection)> = sections
        .into_iter()
        .map(|(p, s)| (p, s.compressed(codec)))
        .collect();
    let mut out = Vec::from(if store_format.is_some() {
        MAGIC
    } else {
        MAGIC_2
    });
    let mut index = Vec::new();
    put_bytes(&mut index, &head.encode());
    if let Some((format, held)) = store_format {
        put_bytes(&mut index, format.as_bytes());
        match held {
            Some(held) => {
                put_list(&mut index, &held.roots);
                put_list(&mut index, &held.tables);
            }
            None => index.extend_from_slice(&HELD_UNKNOWN.to_le_bytes()),
        }
    }
    index.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    for (prefix, section) in &sections {
        put_bytes(&mut index, prefix);
        index.push(section.codec.tag());
        index.extend_from_slice(&(out.len() as u64).to_le_bytes());
        index.extend_from_slice(&(section.bytes.len() as u64).to_le_bytes());
        index.extend_from_slice(&(section.raw_len as u64).to_le_bytes());
        index.extend_from_slice(&(section.records as u64).to_le_bytes());
        index.extend_from_slice(&crc32fast::hash(&section.bytes).to_le_bytes());
        out.extend_from_slice(&section.bytes);
    }
    let crc = crc32fast::hash(&index);
    out.extend_from_slice(&index);
    out.extend_from_slice(&(index.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub(crate) fn decode_checkpoint(object: Bytes, path: &str) -> Result<Checkpoint> {
    let what = format!("image checkpoint {path}");
    let corrupt = |why: &str| Error::Corrupt(format!("{what}: {why}"));
    if object.starts_with(MAGIC_1) {
        return decode_checkpoint_1(object, &what);
    }
    // (the two later formats' magics are of one length)
    let names_format = object.starts_with(MAGIC);
    if object.len() < MAGIC.len() + 8 || !(names_format || object.starts_with(MAGIC_2)) {
        return Err(corrupt("not a moraine image checkpoint"));
    }
    let n = object.len();
    let index_len = u32::from_le_bytes(object[n - 8..n - 4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(object[n - 4..].try_into().expect("4 bytes"));
    let Some(index_at) = (n - 8)
        .checked_sub(index_len)
        .filter(|at| *at >= MAGIC.len())
    else {
        return Err(corrupt("its index length is past its bytes"));
    };
    let index = object.slice(index_at..n - 8);
    if crc32fast::hash(&index) != crc {
        return Err(corrupt("its index's checksum does not match its bytes"));
    }
    let mut r = Reader::new(&index, &what);
    let head = Head::decode(&r.bytes()?)?;
    let (store_format, history_held) = match names_format {
        true => {
            let format = String::from_utf8(r.bytes()?.to_vec())
                .map_err(|_| corrupt("its store format is not text"))?;
            let held = match r.u32()? {
                HELD_UNKNOWN => None,
                roots => {
                    let roots = r.list(roots)?;
                    let tables = r.u32()?;
                    Some(HeldRanges {
                        roots,
                        tables: r.list(tables)?,
                    })
                }
            };
            (Some(format), held)
        }
        false => (None, None),
    };
    let count = r.u32()?;
    let mut sections = BTreeMap::new();
    // the sections lie end to end from the magic to the index
    let mut next = MAGIC.len();
    for _ in 0..count {
        let prefix = r.bytes()?.to_vec();
        let tag = r.take(1)?[0];
        let codec = Codec::from_tag(tag)
            .ok_or_else(|| corrupt(&format!("a section's codec {tag} is unknown")))?;
        let (offset, stored, raw, records) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let section_crc = r.u32()?;
        if offset != next as u64 || stored > (index_at - next) as u64 {
            return Err(corrupt(
                "its sections do not lie end to end before its index",
            ));
        }
        let bytes = object.slice(next..next + stored as usize);
        next += stored as usize;
        if crc32fast::hash(&bytes) != section_crc {
            return Err(corrupt("a section's checksum does not match its bytes"));
        }
        if codec == Codec::None && raw != stored {
            return Err(corrupt("a raw section's lengths differ"));
        }
        let too_large = |_| corrupt("a section is too large");
        let (raw_len, records) = (
            usize::try_from(raw).map_err(too_large)?,
            usize::try_from(records).map_err(too_large)?,
        );
        if codec == Codec::None && records != section_len(&bytes) {
            return Err(corrupt("a raw section's record count differs"));
        }
        let section = StoredSection {
            codec,
            raw_len,
            records,
            bytes,
        };
        if sections.insert(prefix, section).is_some() {
            return Err(corrupt("two sections hold one space"));
        }
    }
    if !r.done() || next != index_at {
        return Err(corrupt("bytes outside its sections and index"));
    }
    Ok(Checkpoint {
        head,
        store_format,
        history_held,
        sections,
    })
}

/// A checkpoint of the first format (`moraine-image-1`, before compression): magic, head, the
/// sections by space prefix, a CRC-32 of everything before it. Read, never written.
fn decode_checkpoint_1(object: Bytes, what: &str) -> Result<Checkpoint> {
    let corrupt = |why: &str| Error::Corrupt(format!("{what}: {why}"));
    if object.len() < MAGIC_1.len() + 4 {
        return Err(corrupt("not a moraine image checkpoint"));
    }
    let body = object.slice(..object.len() - 4);
    let crc = u32::from_le_bytes(object[object.len() - 4..].try_into().expect("4 bytes"));
    if crc32fast::hash(&body) != crc {
        return Err(corrupt("its checksum does not match its bytes"));
    }
    let mut r = Reader::new(&body, what);
    r.take(MAGIC_1.len())?;
    let head = Head::decode(&r.bytes()?)?;
    let n = r.u32()?;
    let mut sections = BTreeMap::new();
    for _ in 0..n {
        let prefix = r.bytes()?.to_vec();
        let len = r.u64()? as usize;
        sections.insert(prefix, StoredSection::raw(r.take(len)?));
    }
    if !r.done() {
        return Err(corrupt("bytes after its last section"));
    }
    Ok(Checkpoint {
        head,
        store_format: None,
        history_held: None,
        sections,
    })
}

/// The writes of one commit: every key it touched, with its new value (`None` deleted it).
pub(crate) type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// A log record: the head the commit made, then each write (a tag: 1 put, 0 delete).
pub(crate) fn encode_log(head: Head, writes: &Writes) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, &head.encode());
    out.extend_from_slice(&(writes.len() as u32).to_le_bytes());
    for (k, v) in writes {
        put_bytes(&mut out, k);
        match v {
            Some(v) => {
                out.push(1);
                put_bytes(&mut out, v);
            }
            None => out.push(0),
        }
    }
    out
}

pub(crate) fn decode_log(value: &Bytes, batch: u64) -> Result<(Head, Writes)> {
    let what = format!("image/log/{batch}");
    let mut r = Reader::new(value, &what);
    let head = Head::decode(&r.bytes()?)?;
    if head.batch_count != batch {
        return Err(Error::Corrupt(format!(
            "{what} holds the writes of batch {}",
            head.batch_count
        )));
    }
    let n = r.u32()?;
    let mut writes = BTreeMap::new();
    for _ in 0..n {
        let k = r.bytes()?.to_vec();
        let v = match r.take(1)?[0] {
            1 => Some(r.bytes()?.to_vec()),
            0 => None,
            t => return Err(Error::Corrupt(format!("{what}: unknown write tag {t}"))),
        };
        writes.insert(k, v);
    }
    if !r.done() {
        return Err(Error::Corrupt(format!("{what} has bytes after its writes")));
    }
    Ok((head, writes))
}

/// The directory commit objects live in (RFC 0004 v3): `moraine/log/<batch>`, each created only
/// if absent, so that of two processes committing on one head exactly one succeeds.
pub(crate) const LOG_DIR: &str = "moraine/log";

/// The commit object of batch `batch`.
pub(crate) fn log_object_path(batch: u64) -> String {
    format!("{LOG_DIR}/{batch:020}")
}

/// The batch a commit object's name holds, if it is one.
pub(crate) fn batch_of_log_object(name: &str) -> Option<u64> {
    name.strip_prefix(LOG_DIR)?.strip_prefix('/')?.parse().ok()
}

/// A commit object of this build: magic, id, codec, the length of the log record, the log
/// record compressed with that codec, CRC-32 of everything before (RFC 0013).
const COMMIT_MAGIC: &[u8] = b"moraine-commit-2\n";

/// A commit object before compression (read, never written): magic, id, the log record, CRC-32.
const COMMIT_MAGIC_1: &[u8] = b"moraine-commit-1\n";

/// A commit as an object: a random id, by which a process whose create got no answer knows its
/// own commit; the head it made; its writes. Framed like a log record, with a CRC-32.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Commit {
    pub id: u128,
    pub head: Head,
    pub writes: Writes,
    /// A retired commit object ([`Commit::retired`]): its writes are in SlateDB and gone from
    /// the object, which keeps its name taken.
    pub retired: bool,
}

/// A retired commit object: magic, id, the log record of its head without writes, CRC-32.
const RETIRED_MAGIC: &[u8] = b"moraine-retired-1\n";

impl Commit {
    /// A commit of `writes` making `head`, with a fresh random id.
    pub(crate) fn new(head: Head, writes: Writes) -> Commit {
        let mut id = [0u8; 16];
        // an id only tells a process its own commit from another's: a clock-based one will do
        // where the system has no randomness
        if getrandom::fill(&mut id).is_err() {
            id = (crate::runtime::unix_micros_now() as u128 ^ (std::process::id() as u128) << 64)
                .to_le_bytes();
        }
        Commit {
            id: u128::from_le_bytes(id),
            head,
            writes,
            retired: false,
        }
    }

    /// This commit retired: its id and head without its writes (what a reclaim leaves of a
    /// commit object it may not delete yet, so that no bytes of its writes stay behind).
    pub(crate) fn retired(&self) -> Commit {
        Commit {
            id: self.id,
            head: self.head,
            writes: Writes::new(),
            retired: true,
        }
    }

    /// The length of the commit's log record, its writes and head, before compression (what
    /// `moraine_max_commit_size` bounds besides the writes themselves).
    pub(crate) fn encoded_len(&self) -> usize {
        let writes: usize = self
            .writes
            .iter()
            .map(|(k, v)| 4 + k.len() + 1 + v.as_ref().map_or(0, |v| 4 + v.len()))
            .sum();
        4 + self.head.encode().len() + 4 + writes
    }

    /// The commit object, its writes compressed with `codec` (a retired one has none).
    pub(crate) fn encode(&self, codec: Codec) -> Vec<u8> {
        let record = encode_log(self.head, &self.writes);
        let mut out = if self.retired {
            let mut out = RETIRED_MAGIC.to_vec();
            out.extend_from_slice(&self.id.to_le_bytes());
            out.extend_from_slice(&record);
            out
        } else {
            let mut out = COMMIT_MAGIC.to_vec();
            out.extend_from_slice(&self.id.to_le_bytes());
            out.push(codec.tag());
            out.extend_from_slice(&(record.len() as u64).to_le_bytes());
            out.extend_from_slice(&codec.compress(&record));
            out
        };
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// The commit object of batch `batch`; damage, or another batch's commit, is refused.
    pub(crate) fn decode(bytes: &Bytes, batch: u64) -> Result<Commit> {
        let what = log_object_path(batch);
        let corrupt = |why: &str| Error::Corrupt(format!("{what} {why}"));
        let n = bytes.len();
        let retired = bytes.starts_with(RETIRED_MAGIC);
        let compressed = bytes.starts_with(COMMIT_MAGIC);
        let magic = match (retired, compressed) {
            (true, _) => RETIRED_MAGIC,
            (_, true) => COMMIT_MAGIC,
            _ => COMMIT_MAGIC_1,
        };
        let header = magic.len() + 16 + if compressed { 9 } else { 0 };
        if n < header + 4 || !bytes.starts_with(magic) {
            return Err(corrupt("is not a moraine commit object"));
        }
        let (body, crc) = bytes.split_at(n - 4);
        if crc32fast::hash(body).to_le_bytes() != crc {
            return Err(corrupt("fails its checksum"));
        }
        let at = magic.len();
        let id = u128::from_le_bytes(body[at..at + 16].try_into().expect("16 bytes"));
        let record = if compressed {
            let tag = body[at + 16];
            let codec = Codec::from_tag(tag)
                .ok_or_else(|| corrupt(&format!("names an unknown codec {tag}")))?;
            let raw_len = u64::from_le_bytes(body[at + 17..header].try_into().expect("8 bytes"));
            let raw_len =
                usize::try_from(raw_len).map_err(|_| corrupt("records an impossible length"))?;
            codec.decompress(&bytes.slice(header..n - 4), raw_len, &what)?
        } else {
            bytes.slice(header..n - 4)
        };
        let (head, writes) = decode_log(&record, batch)?;
        if retired && !writes.is_empty() {
            return Err(corrupt("is retired and holds writes"));
        }
        Ok(Commit {
            id,
            head,
            writes,
            retired,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_and_logs_round_trip_and_damage_is_refused() {
        let head = Head {
            snapshot_id: Some(7),
            batch_count: 9,
        };
        let a = encode_section(
            2,
            [(&b"k1"[..], &b"v1"[..]), (&b"k2"[..], &b""[..])].into_iter(),
        );
        let b = encode_section(0, std::iter::empty());
        let sections = vec![
            (b"a".to_vec(), StoredSection::raw(a.clone())),
            (b"b".to_vec(), StoredSection::raw(b.clone())),
        ];
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
            let held = HeldRanges {
                roots: vec![b"history/".to_vec()],
                tables: vec![b"history/t1/".to_vec(), b"history/t2/".to_vec()],
            };
            for known in [None, Some(&held)] {
                let obj = encode_checkpoint(head, "moraine-store-x", known, vec![], codec);
                let back = decode_checkpoint(Bytes::from(obj), "x").unwrap();
                assert_eq!(back.history_held.as_ref(), known);
            }
            let obj = encode_checkpoint(
                head,
                "moraine-store-x",
                Some(&held),
                sections.clone(),
                codec,
            );
            let back = decode_checkpoint(Bytes::from(obj.clone()), "x").unwrap();
            assert_eq!(back.head, head);
            assert_eq!(back.store_format.as_deref(), Some("moraine-store-x"));
            assert_eq!(back.history_held.as_ref(), Some(&held));
            // the format before names no store format, and is read as it is
            let v2 = encode_checkpoint_as(head, None, sections.clone(), codec);
            let back_2 = decode_checkpoint(Bytes::from(v2), "x").unwrap();
            assert_eq!((back_2.head, back_2.store_format), (head, None));
            assert_eq!(back_2.sections, back.sections);
            assert_eq!(back.sections.len(), 2);
            let stored = &back.sections[&b"a".to_vec()];
            assert_eq!(stored.codec, codec);
            let recs = decode_section(&stored.decompressed().unwrap()).unwrap();
            assert_eq!(recs[0], (b"k1".to_vec(), Bytes::from_static(b"v1")));
            assert_eq!(recs[1].1.len(), 0);
            assert!(
                decode_section(&back.sections[&b"b".to_vec()].decompressed().unwrap())
                    .unwrap()
                    .is_empty()
            );
            // a section read back is written again as it is stored, whatever the codec now
            let again = encode_checkpoint(
                head,
                "moraine-store-x",
                Some(&held),
                back.sections.clone().into_iter().collect(),
                Codec::None,
            );
            assert_eq!(again, obj);
            // every flipped byte and every truncation is refused
            for i in 0..obj.len() {
                let mut bad = obj.clone();
                bad[i] ^= 0x40;
                assert!(
                    decode_checkpoint(Bytes::from(bad), "x").is_err(),
                    "{codec:?}: byte {i}"
                );
                assert!(decode_checkpoint(Bytes::from(obj[..i].to_vec()), "x").is_err());
            }
        }
        // a checkpoint of the format before compression is read, its sections raw
        let mut v1 = Vec::from(MAGIC_1);
        put_bytes(&mut v1, &head.encode());
        v1.extend_from_slice(&1u32.to_le_bytes());
        put_bytes(&mut v1, b"a");
        v1.extend_from_slice(&(a.len() as u64).to_le_bytes());
        v1.extend_from_slice(&a);
        let crc = crc32fast::hash(&v1);
        v1.extend_from_slice(&crc.to_le_bytes());
        let back = decode_checkpoint(Bytes::from(v1.clone()), "x").unwrap();
        assert_eq!(back.head, head);
        assert_eq!(back.sections[&b"a".to_vec()], StoredSection::raw(a.clone()));
        for i in 0..v1.len() {
            let mut bad = v1.clone();
            bad[i] ^= 0x40;
            assert!(
                decode_checkpoint(Bytes::from(bad), "x").is_err(),
                "v1 byte {i}"
            );
        }

        let mut writes = Writes::new();
        writes.insert(b"p".to_vec(), Some(b"value".to_vec()));
        writes.insert(b"d".to_vec(), None);
        let log = Bytes::from(encode_log(head, &writes));
        assert_eq!(decode_log(&log, 9).unwrap(), (head, writes.clone()));
        assert!(decode_log(&log, 8).is_err());
        for i in 0..log.len() {
            assert!(decode_log(&log.slice(..i), 9).is_err());
        }
        let commit = Commit::new(head, writes.clone());
        assert_ne!(commit.id, Commit::new(head, writes.clone()).id);
        assert_eq!(encode_log(head, &writes).len(), commit.encoded_len());
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
            let obj = Bytes::from(commit.encode(codec));
            assert_eq!(Commit::decode(&obj, 9).unwrap(), commit);
            assert!(Commit::decode(&obj, 8).is_err());
            for i in 0..obj.len() {
                let mut bad = obj.to_vec();
                bad[i] ^= 0x40;
                assert!(Commit::decode(&Bytes::from(bad), 9).is_err(), "byte {i}");
                assert!(Commit::decode(&obj.slice(..i), 9).is_err());
            }
        }
        // a commit object of the format before compression is read
        let mut v1 = COMMIT_MAGIC_1.to_vec();
        v1.extend_from_slice(&commit.id.to_le_bytes());
        v1.extend_from_slice(&encode_log(head, &writes));
        let crc = crc32fast::hash(&v1);
        v1.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(Commit::decode(&Bytes::from(v1), 9).unwrap(), commit);
        let retired = commit.retired();
        let back = Commit::decode(&Bytes::from(retired.encode(Codec::Zstd)), 9).unwrap();
        assert!(back.retired && back.writes.is_empty() && back.id == commit.id);
        assert_eq!(batch_of_log_object(&log_object_path(42)), Some(42));
        assert_eq!(
            batch_of_log_object("moraine/image/00000000000000000042"),
            None
        );
        assert_eq!(batch_of_object(&object_path(42)), Some(42));
        assert_eq!(batch_of_object("moraine/image/x"), None);
        assert_eq!(
            decode_pointer(&encode_pointer(42, &object_path(42))).unwrap(),
            (42, object_path(42))
        );
    }
}
