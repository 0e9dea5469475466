//! The process's cache of SlateDB table parts (decoded blocks, indexes, filters, stats).
//!
//! SlateDB reads an SST's index and filter before any block of it, and without a cache it reads
//! and verifies them again for every scan and point read. An image reads its spaces one scan at a
//! time (RFC 0009), a reader reads the head on every pin, and history is read on demand, so all
//! of them would re-read the same few SSTs. moraine is built without SlateDB's `moka` and `foyer`
//! features (each would add crates to Cargo.lock, which the project changes once, with the `aws`
//! feature), so it brings this cache of its own: bounded by bytes, shared by every store the
//! process opens, each under its own scope, evicted by the clock (second chance) algorithm.

use async_trait::async_trait;
use slatedb::db_cache::{CachedEntry, CachedKey, DbCache};
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// What the cache may hold, in bytes of decoded entries.
pub const CAPACITY_BYTES: usize = 64 * 1024 * 1024;

struct Slot<V> {
    value: V,
    size: usize,
    /// Read since the clock hand last passed it: it gets a second chance.
    referenced: bool,
}

struct Inner<K, V> {
    slots: HashMap<K, Slot<V>>,
    /// The clock: every key in `slots`, once, oldest first.
    hand: VecDeque<K>,
    bytes: usize,
}

/// A map bounded by the bytes of its values, evicting by the clock algorithm.
pub struct Clock<K, V> {
    capacity: usize,
    inner: Mutex<Inner<K, V>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Clock<K, V> {
    pub fn new(capacity: usize) -> Self {
        Clock {
            capacity,
            inner: Mutex::new(Inner {
                slots: HashMap::new(),
                hand: VecDeque::new(),
                bytes: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K, V>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, key: &K) -> Option<V> {
        let mut inner = self.lock();
        let slot = inner.slots.get_mut(key)?;
        slot.referenced = true;
        Some(slot.value.clone())
    }

    /// Holds `value` (of `size` bytes), evicting what the clock hand finds unreferenced; a
    /// value larger than the whole capacity is not held.
    pub fn put(&self, key: K, value: V, size: usize) {
        if size > self.capacity {
            return;
        }
        let mut inner = self.lock();
        if let Some(old) = inner.slots.remove(&key) {
            inner.bytes -= old.size;
            inner.hand.retain(|k| k != &key);
        }
        while inner.bytes + size > self.capacity {
            let Some(k) = inner.hand.pop_front() else {
                break;
            };
            let second_chance = match inner.slots.get_mut(&k) {
                Some(slot) if slot.referenced => {
                    slot.referenced = false;
                    true
                }
                _ => false,
            };
            if second_chance {
                inner.hand.push_back(k);
            } else if let Some(gone) = inner.slots.remove(&k) {
                inner.bytes -= gone.size;
            }
        }
        inner.bytes += size;
        inner.hand.push_back(key.clone());
        inner.slots.insert(
            key,
            Slot {
                value,
                size,
                referenced: false,
            },
        );
    }

    pub fn remove(&self, key: &K) {
        self.remove_where(|k| k == key);
    }

    /// Forget every entry whose key `gone` picks.
    pub fn remove_where(&self, gone: impl Fn(&K) -> bool) {
        let mut inner = self.lock();
        let Inner { slots, hand, bytes } = &mut *inner;
        slots.retain(|k, slot| {
            if gone(k) {
                *bytes -= slot.size;
                return false;
            }
            true
        });
        hand.retain(|k| slots.contains_key(k));
    }

    /// (entries, bytes) held now.
    pub fn footprint(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.slots.len(), inner.bytes)
    }
}

/// A byte-bounded cache of SlateDB table parts.
pub struct SstCache(Clock<CachedKey, CachedEntry>);

impl SstCache {
    pub fn new(capacity: usize) -> SstCache {
        SstCache(Clock::new(capacity))
    }

    fn get(&self, key: &CachedKey) -> Option<CachedEntry> {
        self.0.get(key)
    }

    /// Forget every entry of one store (its scope), when it closes.
    pub fn drop_scope(&self, scope: u64) {
        self.0.remove_where(|k| k.db_cache_id() == scope);
    }
}

#[async_trait]
impl DbCache for SstCache {
    async fn get_block(&self, key: &CachedKey) -> Result<Option<CachedEntry>, slatedb::Error> {
        Ok(self.get(key))
    }

    async fn get_index(&self, key: &CachedKey) -> Result<Option<CachedEntry>, slatedb::Error> {
        Ok(self.get(key))
    }

    async fn get_filter(&self, key: &CachedKey) -> Result<Option<CachedEntry>, slatedb::Error> {
        Ok(self.get(key))
    }

    async fn get_stats(&self, key: &CachedKey) -> Result<Option<CachedEntry>, slatedb::Error> {
        Ok(self.get(key))
    }

    async fn insert(&self, key: CachedKey, value: CachedEntry) {
        let size = value.size();
        self.0.put(key, value, size);
    }

    async fn remove(&self, key: &CachedKey) {
        self.0.remove(key);
    }

    fn entry_count(&self) -> u64 {
        self.0.footprint().0 as u64
    }
}

/// The one cache of this process.
pub fn shared() -> Arc<SstCache> {
    static CACHE: OnceLock<Arc<SstCache>> = OnceLock::new();
    CACHE
        .get_or_init(|| Arc::new(SstCache::new(CAPACITY_BYTES)))
        .clone()
}

/// A scope no other open store of this process uses (SlateDB's WAL table ids repeat across
/// databases, so two stores must never share one).
pub fn new_scope() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn the_clock_holds_its_capacity_and_gives_read_entries_a_second_chance() {
        let clock: Clock<u32, &str> = Clock::new(30);
        clock.put(1, "a", 10);
        clock.put(2, "b", 10);
        clock.put(3, "c", 10);
        assert_eq!(clock.footprint(), (3, 30));
        // 1 is read: the hand passes it over and evicts 2 instead
        assert_eq!(clock.get(&1), Some("a"));
        clock.put(4, "d", 10);
        assert_eq!(clock.get(&2), None);
        assert_eq!(clock.get(&1), Some("a"));
        assert_eq!(clock.footprint(), (3, 30));
        // a value larger than the cache is not held, and evicts nothing
        clock.put(5, "huge", 31);
        assert_eq!(clock.get(&5), None);
        assert_eq!(clock.footprint(), (3, 30));
        // replacing a key counts its new size once
        clock.put(3, "c2", 5);
        assert_eq!(clock.get(&3), Some("c2"));
        assert_eq!(clock.footprint(), (3, 25));
        // one big value evicts as many as it needs
        clock.put(6, "f", 30);
        assert_eq!(clock.footprint(), (1, 30));
        assert_eq!(clock.get(&6), Some("f"));
    }

    #[test]
    fn removing_a_scope_forgets_only_its_keys() {
        let clock: Clock<(u64, u32), u8> = Clock::new(100);
        for scope in 1..=2 {
            for k in 0..3 {
                clock.put((scope, k), 0, 5);
            }
        }
        clock.remove_where(|(scope, _)| *scope == 1);
        assert_eq!(clock.footprint(), (3, 15));
        assert_eq!(clock.get(&(1, 0)), None);
        assert_eq!(clock.get(&(2, 2)), Some(0));
        clock.remove(&(2, 2));
        assert_eq!(clock.footprint(), (2, 10));
    }
}
