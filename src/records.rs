//! The records of one image space, in key order, held in chunks shared between images
//! (RFC 0009): advancing an image by a commit copies only the chunks the commit wrote, so a
//! commit that adds one data file to a lake of 100,000 copies one chunk, not the whole table.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Puts (`Some`) and deletes (`None`) in key order.
type Changes<V> = Vec<(Vec<u8>, Option<V>)>;

/// A chunk grows to twice this many records before it splits in two.
const CHUNK_RECORDS: usize = 256;

/// A persistent ordered map from keys to `V`: cloning it, or deriving a changed copy, shares
/// every chunk the change does not touch.
#[derive(Clone)]
pub(crate) struct Records<V> {
    /// Non-empty chunks in key order: every key of a chunk sorts before every key of the next.
    chunks: Vec<Arc<BTreeMap<Vec<u8>, V>>>,
    len: usize,
    chunk_records: usize,
}

impl<V: Clone> Default for Records<V> {
    fn default() -> Self {
        Records::with_chunk_records(CHUNK_RECORDS)
    }
}

impl<V: Clone> Records<V> {
    fn with_chunk_records(chunk_records: usize) -> Self {
        Records {
            chunks: Vec::new(),
            len: 0,
            chunk_records,
        }
    }

    /// The records of `sorted`, which yields keys in ascending order without repeats.
    pub(crate) fn from_sorted(sorted: impl IntoIterator<Item = (Vec<u8>, V)>) -> Self {
        Self::from_sorted_in(sorted, CHUNK_RECORDS)
    }

    fn from_sorted_in(
        sorted: impl IntoIterator<Item = (Vec<u8>, V)>,
        chunk_records: usize,
    ) -> Self {
        let mut out = Records::with_chunk_records(chunk_records);
        // each chunk is built at once from its sorted records (a bulk build), not key by key
        let mut chunk = Vec::with_capacity(chunk_records);
        for record in sorted {
            chunk.push(record);
            if chunk.len() == chunk_records {
                out.push_chunk(std::mem::replace(
                    &mut chunk,
                    Vec::with_capacity(chunk_records),
                ));
            }
        }
        if !chunk.is_empty() {
            out.push_chunk(chunk);
        }
        out
    }

    fn push_chunk(&mut self, sorted: Vec<(Vec<u8>, V)>) {
        let chunk: BTreeMap<Vec<u8>, V> = sorted.into_iter().collect();
        self.len += chunk.len();
        self.chunks.push(Arc::new(chunk));
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk that holds `key` if any does: the last one whose first key is at or before it.
    fn chunk_of(&self, key: &[u8]) -> usize {
        self.chunks
            .partition_point(|c| c.keys().next().is_some_and(|first| first.as_slice() <= key))
            .saturating_sub(1)
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&V> {
        self.chunks.get(self.chunk_of(key))?.get(key)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Vec<u8>, &V)> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The records whose keys start with `prefix`, in key order.
    pub(crate) fn range<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a V)> {
        let from = self.chunk_of(prefix);
        self.chunks[from.min(self.chunks.len())..]
            .iter()
            .flat_map(move |c| c.range(prefix.to_vec()..))
            .take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// A copy with `changes` applied (`None` deletes the key), sharing every chunk they leave
    /// alone.
    pub(crate) fn changed(&self, changes: BTreeMap<Vec<u8>, Option<V>>) -> Self {
        let mut out = self.clone();
        if changes.is_empty() {
            return out;
        }
        if out.chunks.is_empty() {
            out.chunks.push(Arc::new(BTreeMap::new()));
        }
        // group the changes by the chunk they fall in (both in key order)
        let mut by_chunk: Vec<(usize, Changes<V>)> = Vec::new();
        for (k, v) in changes {
            let at = out.chunk_of(&k);
            match by_chunk.last_mut() {
                Some((i, group)) if *i == at => group.push((k, v)),
                _ => by_chunk.push((at, vec![(k, v)])),
            }
        }
        // rebuild those chunks, back to front so the indexes of earlier ones hold: each is the
        // merge of its records and its changes, copying only the records that stay
        for (at, group) in by_chunk.into_iter().rev() {
            let before = out.chunks[at].len();
            let mut merged: Vec<(Vec<u8>, V)> = Vec::with_capacity(before + group.len());
            let mut changes = group.into_iter().peekable();
            for (k, v) in out.chunks[at].iter() {
                while let Some((ck, _)) = changes.peek() {
                    if ck.as_slice() >= k.as_slice() {
                        break;
                    }
                    let (ck, cv) = changes.next().expect("peeked");
                    merged.extend(cv.map(|cv| (ck, cv)));
                }
                match changes.next_if(|(ck, _)| ck == k) {
                    Some((ck, cv)) => merged.extend(cv.map(|cv| (ck, cv))),
                    None => merged.push((k.clone(), v.clone())),
                }
            }
            merged.extend(changes.filter_map(|(ck, cv)| cv.map(|cv| (ck, cv))));
            out.len = out.len + merged.len() - before;
            // a chunk grown past twice its size splits into pieces of its size
            let piece = if merged.len() > 2 * out.chunk_records {
                out.chunk_records
            } else {
                merged.len().max(1)
            };
            let mut pieces: Vec<Arc<BTreeMap<Vec<u8>, V>>> = Vec::new();
            let mut rest = merged.into_iter().peekable();
            while rest.peek().is_some() {
                pieces.push(Arc::new(rest.by_ref().take(piece).collect()));
            }
            out.chunks.splice(at..at + 1, pieces);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random puts and deletes through small chunks agree with a plain map at every step, and a
    /// change leaves the records it was derived from as they were.
    #[test]
    fn records_agree_with_a_map_through_random_changes() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let key = |n: u64| format!("k{:04}", n % 700).into_bytes();
        let mut map: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let mut records: Records<u64> = Records::from_sorted_in(Vec::new(), 4);
        for step in 0..300 {
            let mut changes = BTreeMap::new();
            for _ in 0..(next() % 40) {
                let k = key(next());
                let v = (next() % 3 != 0).then_some(step);
                changes.insert(k, v);
            }
            let before: Vec<(Vec<u8>, u64)> =
                records.iter().map(|(k, v)| (k.clone(), *v)).collect();
            let next_records = records.changed(changes.clone());
            let unchanged: Vec<(Vec<u8>, u64)> =
                records.iter().map(|(k, v)| (k.clone(), *v)).collect();
            assert_eq!(before, unchanged, "step {step}: the old records changed");
            for (k, v) in changes {
                match v {
                    Some(v) => map.insert(k, v),
                    None => map.remove(&k),
                };
            }
            records = next_records;
            let got: Vec<(Vec<u8>, u64)> = records.iter().map(|(k, v)| (k.clone(), *v)).collect();
            let want: Vec<(Vec<u8>, u64)> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
            assert_eq!(got, want, "step {step}");
            assert_eq!(records.len(), map.len());
            assert!(records.chunks.iter().all(|c| !c.is_empty() && c.len() <= 8));
            for probe in 0..20 {
                let k = key(next());
                assert_eq!(records.get(&k), map.get(&k), "step {step} probe {probe}");
            }
            let prefix = format!("k{:02}", next() % 7).into_bytes();
            let ranged: Vec<&Vec<u8>> = records.range(&prefix).map(|(k, _)| k).collect();
            let want: Vec<&Vec<u8>> = map.keys().filter(|k| k.starts_with(&prefix)).collect();
            assert_eq!(ranged, want, "step {step} prefix");
        }
        // built from sorted records, the same map
        let rebuilt = Records::from_sorted_in(map.clone(), 4);
        assert!(rebuilt.iter().eq(map.iter()));
        assert_eq!(Records::<u64>::default().range(b"k").count(), 0);
    }
}
