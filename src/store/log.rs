//! Commit objects (RFC 0004 v3): `moraine/log/<batch>`, created only if absent. Of two
//! processes committing on one head, the store lets exactly one create the next batch's object:
//! the store's compare-and-set decides every commit, and no process needs SlateDB's writer role
//! to commit. SlateDB holds the folded state; the objects after it are the lake's tail.

use super::*;
use crate::checkpoint::Commit;
use bytes::Bytes;
use object_store::{PutMode, PutOptions, PutPayload};

/// How long a commit object is kept at least after it was written, however old its batch: an
/// attach whose view of the tail is younger than half this cannot take a deleted object's name
/// for one never written (`Store::tail_is_confirmed`).
pub(super) const DELETE_AFTER: Duration = Duration::from_secs(60);

/// How many of the newest commit objects a reclaim retires rather than deletes.
pub(super) const KEEP_RETIRED: u64 = 64;

/// What a conditional create of a commit object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Create {
    /// The object is ours: the commit is durable.
    Ours,
    /// Another commit holds (or is taking) the name: ours was not written.
    Taken,
    /// The store gave no answer that says (a network failure after the object store's own
    /// retries): the object may exist or not, and reading it says which.
    Unanswered(String),
}

/// What the store answered a create of a commit object, once it answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The object is ours: the commit is durable.
    Ours,
    /// Another commit holds the name: ours was not written.
    Taken,
}

/// At most this many commit objects are read at once when following the tail.
pub(super) const READ_AHEAD: usize = 16;

/// The commit objects from one batch on, in order, read ahead: as many reads at once as
/// objects found so far (one until one is found), up to [`READ_AHEAD`], so the reads under way
/// double each round trip. A tail with nothing new costs one request, one with one commit two
/// (as reading one by one would), and one of `n` commits about `log2(n)` round trips rather
/// than `n` (then `n / READ_AHEAD`), for at most as many reads past its end as it found
/// objects.
pub(super) struct Tail {
    objects: Objects,
    /// The batch of the next read to start.
    next: u64,
    /// Reads started, in batch order.
    ahead: std::collections::VecDeque<tokio::task::JoinHandle<Result<Option<Commit>>>>,
    found: usize,
    /// Set once it met its end or an error: it reads nothing more.
    done: bool,
}

impl Tail {
    pub(super) fn from(objects: &Objects, batch: u64) -> Tail {
        Tail {
            objects: objects.clone(),
            next: batch,
            ahead: Default::default(),
            found: 0,
            done: false,
        }
    }

    /// How many reads may be under way now.
    fn window(&self) -> usize {
        self.found.clamp(1, READ_AHEAD)
    }

    /// The next commit object, or `None` at the first batch with none (the reads started past
    /// it are dropped).
    pub(super) async fn next(&mut self) -> Result<Option<Commit>> {
        if self.done {
            return Ok(None);
        }
        let got = if self.ahead.is_empty() && self.window() == 1 {
            // one read at a time: in the caller's task, as without read-ahead (no hand-off to
            // another thread, which an idle process pays for: RFC 0009)
            self.next += 1;
            self.objects.read_commit(self.next - 1).await
        } else {
            while self.ahead.len() < self.window() {
                let (objects, batch) = (self.objects.clone(), self.next);
                self.ahead.push_back(tokio::spawn(
                    async move { objects.read_commit(batch).await }.in_current_span(),
                ));
                self.next += 1;
            }
            let read = self.ahead.pop_front().expect("a read under way");
            read.await
                .unwrap_or_else(|e| Err(Error::Storage(format!("reading a commit object: {e}"))))
        };
        match got {
            Ok(Some(commit)) => {
                self.found += 1;
                Ok(Some(commit))
            }
            other => {
                self.stop();
                other
            }
        }
    }

    fn stop(&mut self) {
        self.done = true;
        for read in self.ahead.drain(..) {
            read.abort();
        }
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Objects {
    /// Create the commit object of batch `batch` holding `object` (an encoded [`Commit`]), only
    /// if absent.
    pub(super) async fn create_commit(&self, batch: u64, object: Bytes) -> Result<Create> {
        let path = object_store::path::Path::from(checkpoint::log_object_path(batch));
        let span = tracing::debug_span!(target: "moraine::store", "moraine.log.create", batch);
        let put = self.store.put_opts(
            &path,
            PutPayload::from(object),
            PutOptions::from(PutMode::Create),
        );
        match put.instrument(span).await {
            Ok(_) => Ok(Create::Ours),
            // S3 answers 412 when the object exists and 409 while another conditional write of
            // it is in flight: either way this one was refused
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(Create::Taken),
            // refused before anything was written
            Err(
                e @ (object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
                | object_store::Error::NotSupported { .. }
                | object_store::Error::NotImplemented { .. }),
            ) => Err(Error::Storage(format!("creating {path}: {e}"))),
            Err(e) => Ok(Create::Unanswered(format!("creating {path}: {e}"))),
        }
    }

    /// [`Objects::create_commit`] until the store answers: an attempt without an answer is
    /// made again (after 50 ms, doubling up to 1 s), and a refusal after such an attempt reads
    /// the object, which may be this commit's own. Runs until answered: the caller bounds it.
    pub(super) async fn create_commit_until_answered(
        &self,
        commit: &Commit,
        object: Bytes,
    ) -> Result<Answer> {
        let batch = commit.head.batch_count;
        let mut unanswered = false;
        let mut wait = Duration::from_millis(50);
        loop {
            let created = match self.create_commit(batch, object.clone()).await {
                Ok(created) => created,
                // an earlier try may have created it: only reading the object can say
                Err(e) if unanswered => Create::Unanswered(e.to_string()),
                Err(e) => return Err(e),
            };
            match created {
                Create::Ours => return Ok(Answer::Ours),
                Create::Taken if !unanswered => return Ok(Answer::Taken),
                Create::Taken => match self.read_commit(batch).await {
                    Ok(Some(found)) if found.id == commit.id => return Ok(Answer::Ours),
                    Ok(_) => return Ok(Answer::Taken),
                    Err(e) => tracing::debug!(
                        target: "moraine::store",
                        "moraine: reading commit object {batch} failed ({e}); trying again"
                    ),
                },
                Create::Unanswered(e) => {
                    unanswered = true;
                    tracing::debug!(
                        target: "moraine::store",
                        "moraine: {e}; trying again in {} ms",
                        wait.as_millis()
                    );
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(1));
        }
    }

    /// The commit object of `batch`, if one exists.
    pub(super) async fn read_commit(&self, batch: u64) -> Result<Option<Commit>> {
        let path = object_store::path::Path::from(checkpoint::log_object_path(batch));
        let span = tracing::trace_span!(target: "moraine::store", "moraine.log.read", batch);
        let got = async {
            match self.store.get(&path).await {
                Ok(got) => got.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        }
        .instrument(span)
        .await
        .map_err(|e| Error::Storage(format!("reading {path}: {e}")))?;
        got.map(|bytes| Commit::decode(&bytes, batch)).transpose()
    }

    /// Retire the commit objects of batches up to `batch`, which SlateDB holds durably: the
    /// newest [`KEEP_RETIRED`] are rewritten without their writes (their names stay taken, so
    /// a writer whose view of the lake is a moment old cannot create one again), the others
    /// are deleted. How many objects held writes before.
    pub(super) async fn retire_commits_upto(&self, batch: u64) -> Result<u64> {
        let keep_from = batch.saturating_sub(KEEP_RETIRED) + 1;
        let mut retired = 0;
        for (b, location, modified) in self.commits_upto(batch).await? {
            if b < keep_from && old_enough(&location, modified) {
                self.store
                    .delete(&location)
                    .await
                    .map_err(|e| Error::Storage(format!("deleting {location}: {e}")))?;
                retired += 1;
                continue;
            }
            match self.read_commit(b).await? {
                Some(commit) if !commit.retired => {
                    self.store
                        .put(
                            &location,
                            PutPayload::from(commit.retired().encode(Codec::None)),
                        )
                        .await
                        .map_err(|e| Error::Storage(format!("retiring {location}: {e}")))?;
                    retired += 1;
                }
                _ => {}
            }
        }
        Ok(retired)
    }

    /// Delete the commit objects of batches up to `batch`; how many went. A failed delete is
    /// logged and left for a later one.
    pub(super) async fn delete_commits_upto(&self, batch: u64) -> Result<u64> {
        let mut deleted = 0;
        for (_, location, modified) in self.commits_upto(batch).await? {
            if !old_enough(&location, modified) {
                continue;
            }
            match self.store.delete(&location).await {
                Ok(()) => deleted += 1,
                Err(e) => tracing::warn!(
                    target: "moraine::store",
                    "moraine: deleting the commit object {location} failed: {e}"
                ),
            }
        }
        Ok(deleted)
    }

    /// Whether a commit object after `batch` exists: the first one's batch.
    pub(super) async fn first_commit_after(&self, batch: u64) -> Result<Option<u64>> {
        use futures::StreamExt;
        let dir = object_store::path::Path::from(checkpoint::LOG_DIR);
        let offset = object_store::path::Path::from(checkpoint::log_object_path(batch));
        let mut listed = self.store.list_with_offset(Some(&dir), &offset);
        let mut first = None;
        while let Some(object) = listed.next().await {
            let object = object.map_err(|e| Error::Storage(format!("listing {dir}: {e}")))?;
            if let Some(b) = checkpoint::batch_of_log_object(object.location.as_ref()) {
                if b > batch {
                    first = Some(first.map_or(b, |f: u64| f.min(b)));
                }
            }
        }
        Ok(first)
    }

    /// The commit objects of batches up to `batch`, by batch, with when each was written.
    #[allow(clippy::type_complexity)]
    async fn commits_upto(
        &self,
        batch: u64,
    ) -> Result<Vec<(u64, object_store::path::Path, chrono::DateTime<chrono::Utc>)>> {
        let dir = object_store::path::Path::from(checkpoint::LOG_DIR);
        let listed = self
            .store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| Error::Storage(format!("listing {dir}: {e}")))?;
        let mut found: Vec<_> = listed
            .objects
            .into_iter()
            .filter_map(|o| {
                let b = checkpoint::batch_of_log_object(o.location.as_ref())?;
                Some((b, o.location, o.last_modified))
            })
            .filter(|(b, _, _)| *b <= batch)
            .collect();
        found.sort();
        Ok(found)
    }
}

/// Whether a commit object written at `modified` may be deleted now ([`DELETE_AFTER`]).
fn old_enough(
    location: &object_store::path::Path,
    modified: chrono::DateTime<chrono::Utc>,
) -> bool {
    let age = chrono::Utc::now().signed_duration_since(modified);
    let old = age.to_std().is_ok_and(|age| age >= DELETE_AFTER);
    if !old {
        tracing::trace!(
            target: "moraine::store",
            %location,
            "moraine: a commit object kept: written too recently to delete"
        );
    }
    old
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Writes;

    fn objects(store: Arc<dyn ObjectStore>) -> Objects {
        Objects { store, local: None }
    }

    fn commit(batch: u64, key: &str) -> Commit {
        let mut writes = Writes::new();
        writes.insert(key.as_bytes().to_vec(), Some(b"v".to_vec()));
        Commit::new(
            Head {
                snapshot_id: Some(batch as i64),
                batch_count: batch,
            },
            writes,
        )
    }

    fn exactly_one_of_two_racers_creates_each_batch(objects: Objects) {
        for batch in 1..=20 {
            let (a, b) = (commit(batch, "a"), commit(batch, "b"));
            let (ra, rb) = block_on(async {
                tokio::join!(
                    objects.create_commit(batch, a.encode(Codec::Zstd).into()),
                    objects.create_commit(batch, b.encode(Codec::Zstd).into())
                )
            });
            let (ra, rb) = (ra.unwrap(), rb.unwrap());
            assert_ne!(ra, rb, "batch {batch}: {ra:?} and {rb:?}");
            let stored = block_on(objects.read_commit(batch)).unwrap().unwrap();
            let winner = if ra == Create::Ours { &a } else { &b };
            assert_eq!(&stored, winner);
            // a later create of a taken batch is refused too, and changes nothing
            assert_eq!(
                block_on(
                    objects.create_commit(batch, commit(batch, "c").encode(Codec::Zstd).into())
                )
                .unwrap(),
                Create::Taken
            );
            assert_eq!(
                block_on(objects.read_commit(batch)).unwrap().unwrap(),
                *winner
            );
        }
        assert_eq!(block_on(objects.read_commit(21)).unwrap(), None);
        assert_eq!(block_on(objects.first_commit_after(15)).unwrap(), Some(16));
        assert_eq!(block_on(objects.first_commit_after(20)).unwrap(), None);
        // written just now: none is deleted yet, whatever its batch
        assert_eq!(block_on(objects.delete_commits_upto(10)).unwrap(), 0);
        assert!(block_on(objects.read_commit(1)).unwrap().is_some());
    }

    /// A local-disk store whose commit objects 1..=`old` were written two minutes ago.
    fn local_with_old_commits(dir: &std::path::Path, total: u64, old: u64) -> Objects {
        let fs = Arc::new(local::LocalStore::new(dir).unwrap());
        let objects = Objects {
            store: fs.clone(),
            local: Some(fs),
        };
        for batch in 1..=total {
            let c = commit(batch, "withdrawn-value").encode(Codec::Zstd).into();
            assert_eq!(
                block_on(objects.create_commit(batch, c)).unwrap(),
                Create::Ours
            );
        }
        let then = std::time::SystemTime::now() - 2 * DELETE_AFTER;
        for batch in 1..=old {
            let path = dir.join(checkpoint::log_object_path(batch));
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(then).unwrap();
        }
        objects
    }

    #[test]
    fn only_commit_objects_written_long_enough_ago_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let objects = local_with_old_commits(dir.path(), 20, 10);
        assert_eq!(block_on(objects.delete_commits_upto(15)).unwrap(), 10);
        assert_eq!(block_on(objects.read_commit(10)).unwrap(), None);
        assert!(block_on(objects.read_commit(11)).unwrap().is_some());
        assert_eq!(block_on(objects.first_commit_after(3)).unwrap(), Some(11));
    }

    /// The commits `tail` yields, in order, until its end.
    fn read_to_end(tail: &mut Tail) -> Vec<u64> {
        block_on(async {
            let mut got = Vec::new();
            while let Some(c) = tail.next().await? {
                got.push(c.head.batch_count);
            }
            Ok::<_, Error>(got)
        })
        .unwrap()
    }

    #[test]
    fn the_tail_is_read_in_order_ahead_of_its_reader_and_stops_at_a_gap() {
        let faulty = crate::testing::faulty::FaultyStore::new(Arc::new(
            object_store::memory::InMemory::new(),
        ));
        let objects = objects(faulty.clone());
        for batch in (1..=40).filter(|b| *b != 31) {
            let c = commit(batch, "k").encode(Codec::Zstd).into();
            assert_eq!(
                block_on(objects.create_commit(batch, c)).unwrap(),
                Create::Ours
            );
        }
        let log_reads = |faulty: &crate::testing::faulty::FaultyStore| {
            faulty
                .recorded()
                .iter()
                .filter(|r| r.starts_with("get ") && r.contains(checkpoint::LOG_DIR))
                .count()
        };
        faulty.record_requests();
        // nothing new: one read; one commit new: two, as reading one by one
        assert!(read_to_end(&mut Tail::from(&objects, 41)).is_empty());
        assert_eq!(log_reads(&faulty), 1);
        assert_eq!(read_to_end(&mut Tail::from(&objects, 40)), vec![40]);
        assert_eq!(log_reads(&faulty), 2);
        // commits up to a gap: every one, in order, nothing past the gap, and the reads past
        // the end no more than the commits found (nor than READ_AHEAD); several at once
        faulty.delay_reads(20);
        for (from, found) in [(26u64, 5usize), (1, 30)] {
            let mut tail = Tail::from(&objects, from);
            let got = read_to_end(&mut tail);
            assert_eq!(got, (from..from + found as u64).collect::<Vec<_>>());
            // (and it stays at its end)
            assert!(read_to_end(&mut tail).is_empty());
            let reads = log_reads(&faulty);
            let past = found.min(READ_AHEAD);
            assert!(
                reads > found && reads <= found + past,
                "{reads} reads for {found} commits"
            );
        }
        let most = faulty
            .most_reading
            .load(std::sync::atomic::Ordering::SeqCst);
        assert!((2..=READ_AHEAD).contains(&most), "{most} reads at once");
    }

    #[test]
    fn exactly_one_of_two_racers_creates_each_batch_in_memory() {
        exactly_one_of_two_racers_creates_each_batch(objects(Arc::new(
            object_store::memory::InMemory::new(),
        )));
    }

    #[test]
    fn exactly_one_of_two_racers_creates_each_batch_on_a_local_disk() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(local::LocalStore::new(dir.path()).unwrap());
        exactly_one_of_two_racers_creates_each_batch(Objects {
            store: fs.clone(),
            local: Some(fs),
        });
    }

    #[test]
    fn retired_commit_objects_keep_their_names_and_lose_their_writes() {
        let dir = tempfile::tempdir().unwrap();
        let total = KEEP_RETIRED + 10;
        // 1..=5 written long ago; 6..=9 below the newest 64 but written just now
        let objects = local_with_old_commits(dir.path(), total, 5);
        assert_eq!(
            block_on(objects.retire_commits_upto(total - 1)).unwrap(),
            total - 1
        );
        for batch in 1..=5 {
            assert_eq!(
                block_on(objects.read_commit(batch)).unwrap(),
                None,
                "deleted"
            );
        }
        for batch in 6..total {
            let got = block_on(objects.read_commit(batch)).unwrap().unwrap();
            assert!(got.retired && got.writes.is_empty(), "batch {batch}");
            let again = commit(batch, "again").encode(Codec::Zstd).into();
            assert_eq!(
                block_on(objects.create_commit(batch, again)).unwrap(),
                Create::Taken
            );
        }
        assert!(
            !block_on(objects.read_commit(total))
                .unwrap()
                .unwrap()
                .retired
        );
        // no byte of a retired commit's writes is left
        let mut left = Vec::new();
        for entry in std::fs::read_dir(dir.path().join(checkpoint::LOG_DIR)).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            if bytes.windows(15).any(|w| w == b"withdrawn-value") {
                left.push(bytes.len());
            }
        }
        assert_eq!(left.len(), 1, "only the newest, not retired, holds it");
    }

    #[test]
    fn a_damaged_commit_object_is_refused() {
        let objects = objects(Arc::new(object_store::memory::InMemory::new()));
        let path = object_store::path::Path::from(checkpoint::log_object_path(3));
        block_on(objects.store.put(&path, PutPayload::from_static(b"junk"))).unwrap();
        let e = block_on(objects.read_commit(3)).unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e}");
    }
}
