//! The committed image transactions pin (RFC 0009): the one a writer's commits install, or one
//! read afresh when the store's head has moved (a reader following the writer) or the image was
//! dropped; an attach's first image warms the planning tables in the background.

use super::*;

/// An attach without the folder role found its image (at batch `image`) far past its SlateDB
/// state (at folded head `folded`) and asked for that state to be read afresh in the
/// background.
#[derive(Clone, Copy, Debug)]
pub(super) struct CatchUp {
    folded: u64,
    image: u64,
}

/// How long after it last met another process's commit a read-write attach reads the lake's
/// tail at every pin ([`Store::tail_due`]).
const OTHERS_ABOUT_FOR: std::time::Duration = std::time::Duration::from_secs(10);

impl Store {
    pub(crate) fn current_image(&self) -> Option<Arc<Image>> {
        self.image.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    #[cfg(test)]
    pub(crate) fn install_image_for_test(&self, image: Arc<Image>) {
        self.install_image(Some(image));
    }

    /// Test hook: as if a commit wrote its batch and then panicked before installing its
    /// image, leaving `stale` installed.
    #[cfg(test)]
    pub(crate) fn lose_install_for_test(&self, stale: Arc<Image>) {
        self.image_unsure.store(true, Ordering::SeqCst);
        self.install_image(Some(stale));
    }

    pub(super) fn install_image(&self, image: Option<Arc<Image>>) {
        let mut installed = self.image.lock().unwrap_or_else(|p| p.into_inner());
        let new_head = match (&*installed, &image) {
            (Some(old), Some(new)) => old.head() != new.head(),
            _ => true,
        };
        *installed = image;
        if new_head {
            // after the install: a transaction that began later pins it, or a newer one
            self.head_installed_at
                .fetch_max(unix_micros_now(), Ordering::SeqCst);
        }
    }

    /// When an image of a new head was last installed, in microseconds since the Unix epoch.
    pub(crate) fn head_installed_at(&self) -> i64 {
        self.head_installed_at.load(Ordering::SeqCst)
    }

    /// The image a transaction beginning now reads (RFC 0009): the current one while the store's
    /// head is the one it was read at, else one read afresh (a reader following the writer, or
    /// a writer whose image was dropped). Never changes under a transaction that pinned it.
    pub(crate) fn pin_image(&self) -> Result<Arc<Image>> {
        let span = tracing::trace_span!(target: "moraine::store", "moraine.pin", store = %self.url);
        let _enter = span.enter();
        match self.pin_once() {
            // the folder role was taken while this pin read through SlateDB's writer: go on
            // without it
            Err(Error::Fenced(_)) if !self.read_only => {
                self.go_on_without_the_role()?;
                self.pin_once()
            }
            pinned => pinned,
        }
    }

    fn pin_once(&self) -> Result<Arc<Image>> {
        self.settle()?;
        if let Backend::Writer(..) = &*self.backend() {
            // The folder's commits install their images under the commit lock, and it folds
            // other processes' commits once per poll interval: between those, pinning reads
            // nothing. A folder another attach fenced goes on without the role; a closed one
            // fails here.
            match self.close_reason() {
                Some(slatedb::CloseReason::Fenced) if !self.read_only => {
                    let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
                    self.demote_locked()?;
                }
                Some(reason) => {
                    return Err(Error::from(slatedb::Error::closed(
                        "the lake's writer is closed".into(),
                        reason,
                    )))
                }
                None if !self.image_unsure.load(Ordering::SeqCst) => {
                    if let Some(image) = self.current_image() {
                        if !self.tail_due() {
                            return Ok(image);
                        }
                        return self.fold_into_image();
                    }
                }
                None => {}
            }
        }
        let now = self.bounded("reading the head", self.read_head())?;
        // an image at or past the head just read is current: a writer's moves only under the
        // commit lock, and a reader's state only moves forward; a reader also reads the
        // lake's tail once per poll interval
        let current = |image: &Arc<Image>| image.head().batch_count >= now.batch_count;
        if let Some(image) = self.current_image().filter(current) {
            if !self.tail_due() {
                return Ok(image);
            }
        }
        let _one_at_a_time = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        // a commit that timed out while this pin waited left a batch of unknown outcome in
        // SlateDB's memtable, which a read would see: settle it first
        self.settle_locked()?;
        // a writer folds the commits other processes made before it reads its head
        if let Backend::Writer(db, _) = &*self.backend() {
            let started = std::time::Instant::now();
            match block_on(within(
                self.tail_timeout(),
                &self.url,
                "folding the commits after the head",
                self.fold_tail(db),
            )) {
                Ok(_) => {
                    *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(started)
                }
                Err(e) => self.fold_unread(e)?,
            }
        }
        // Under the commit lock no commit of this process is in flight, so the head read now is
        // the one to trust (the one read above may be older than a commit that wrote and never
        // installed its image while this pin waited for the lock).
        let now = self.bounded("reading the head", self.read_head())?;
        let previous = self.current_image();
        if let (Some(image), Backend::Reader(_), false) =
            (&previous, &*self.backend(), self.read_only)
        {
            if now.batch_count > image.head().batch_count {
                // the folded state passed this plain writer's image: another process committed
                self.met_another_writer();
            }
        }
        if let Some(image) = previous
            .as_ref()
            .filter(|i| i.head().batch_count >= now.batch_count)
        {
            // an image at the store's head is sure again; the folder folded the tail above
            self.image_unsure.store(false, Ordering::SeqCst);
            if !self.tail_due() || self.is_folder() {
                return Ok(image.clone());
            }
            let (image, now) = self.follow_tail(image.clone(), now)?;
            self.install_image(Some(image.clone()));
            self.take_over_if_unfolded(image.head(), now);
            return Ok(image);
        }
        let _refresh = tracing::debug_span!(
            target: "moraine::store",
            "moraine.refresh",
            store = %self.url,
            from = previous.as_ref().map(|i| i.head().batch_count),
            to = now.batch_count
        )
        .entered();
        let (image, now) = self.load_image_at(previous.as_deref(), now)?;
        let image = Arc::new(image);
        if let (Some(batch), Backend::Writer(..)) = (image.checkpoint_batch(), &*self.backend()) {
            self.count_checkpoint(batch);
        }
        tracing::debug!(
            target: "moraine::store",
            batch = image.head().batch_count,
            records = image.footprint().0,
            "moraine: image read from the store"
        );
        let (image, now) = if let Backend::Reader(_) = &*self.backend() {
            self.follow_tail(image, now)?
        } else {
            (image, now)
        };
        self.install_image(Some(image.clone()));
        self.image_unsure.store(false, Ordering::SeqCst);
        self.take_over_if_unfolded(image.head(), now);
        // an attach's image, or one read again from scratch (a dropped image is read like an
        // attach's): its first transactions will read the planning tables
        if previous.is_none() {
            warm_in_background(&image, &self.url);
        }
        Ok(image)
    }
}

impl Store {
    /// This attach learned that another took the folder role (a read through its writer met
    /// the fence): it goes on with a reader of the lake. Not under the commit lock.
    pub(crate) fn go_on_without_the_role(&self) -> Result<()> {
        let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        if !self.is_folder() {
            // another thread of this attach went on without it first
            return Ok(());
        }
        self.demote_fenced_locked()
    }

    /// Whether an attach reads the lake's tail (the commit objects after its image) before its
    /// next pin: once per poll interval; a read-write attach, at every pin while other writers
    /// are about (it met another process's commit within [`OTHERS_ABOUT_FOR`]), so that its
    /// transactions begin on the head and DuckLake's first try at a commit is not spent on a
    /// view already passed (as DuckLake reads the head from a database server at each
    /// transaction).
    fn tail_due(&self) -> bool {
        let checked = *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner());
        let Some(at) = checked else {
            return true;
        };
        if !self.read_only && self.others_about() {
            return true;
        }
        at.elapsed() >= self.access.reader_poll
    }

    /// Whether this attach met another process's commit within [`OTHERS_ABOUT_FOR`].
    fn others_about(&self) -> bool {
        self.others_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at.elapsed() < OTHERS_ABOUT_FOR)
    }

    /// This attach met another process's commit just now.
    pub(super) fn met_another_writer(&self) {
        *self.others_seen.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(std::time::Instant::now());
    }

    /// A read-write attach whose image (at `head`) is far past the folded state `folded` (nobody
    /// folds: the folder detached or died) takes the folder role. The state it has may only be
    /// old (read before a folder that folds all along folded the rest), so it first reads the
    /// state afresh, in the background: the role is taken when that read shows the same folded
    /// head ([`Store::take_over_after_catch_up`]). The caller holds the commit lock.
    pub(super) fn take_over_if_unfolded(&self, head: Head, folded: Head) {
        let behind = head.batch_count.saturating_sub(folded.batch_count);
        if self.read_only || self.is_folder() || behind <= role::TAKE_OVER_AFTER {
            return;
        }
        self.catch_up_if_far(&self.backend(), head, folded);
    }

    /// A read afresh of this attach's state, asked when its image was at `asked.image` and the
    /// state at `asked.folded`, has ended: when the state still shows that folded head and the
    /// image is far past it, nobody folds, and this attach takes the folder role.
    fn take_over_after_catch_up(&self, asked: CatchUp) {
        let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        if self.read_only || self.is_folder() || self.closed.load(Ordering::SeqCst) {
            return;
        }
        let Some(image) = self.current_image() else {
            return;
        };
        let Ok(now) = self.bounded("reading the head", self.read_head()) else {
            return;
        };
        let behind = image.head().batch_count.saturating_sub(now.batch_count);
        if now.batch_count != asked.folded || behind <= role::TAKE_OVER_AFTER {
            return;
        }
        tracing::debug!(
            target: "moraine::store",
            behind,
            "moraine: nobody folds the lake's tail; taking the folder role"
        );
        if let Err(e) = self.promote_locked(false) {
            tracing::warn!(
                target: "moraine::store",
                "moraine: taking the folder role of {} failed ({e}); committing without it",
                self.url
            );
        }
    }

    /// A writer's pin when the tail is due: the commits other processes made since its image
    /// folded into SlateDB, and its image advanced by them.
    fn fold_into_image(&self) -> Result<Arc<Image>> {
        let Backend::Writer(db, _) = &*self.backend() else {
            unreachable!("a writer's pin")
        };
        let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        let started = std::time::Instant::now();
        let folded = match block_on(within(
            self.tail_timeout(),
            &self.url,
            "folding the commits after the head",
            self.fold_tail(db),
        )) {
            Ok(folded) => folded,
            Err(e) => {
                self.fold_unread(e)?;
                Vec::new()
            }
        };
        *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(started);
        let image = self.current_image();
        match image {
            Some(image) if !self.image_unsure.load(Ordering::SeqCst) => {
                if folded.is_empty() || image.head().batch_count + 1 != folded[0].head.batch_count {
                    if folded.is_empty() {
                        return Ok(image);
                    }
                    // not the image's next commits: read afresh below
                } else {
                    let log = folded.into_iter().map(|c| (c.head, c.writes)).collect();
                    let next = Arc::new(image.follow(log, Some(self.take_snapshot(db)?))?);
                    self.install_image(Some(next.clone()));
                    return Ok(next);
                }
            }
            _ => {}
        }
        self.install_image(None);
        drop(_commit);
        self.pin_image()
    }

    /// How long a pin waits for the lake's tail: a store that does not answer that soon leaves
    /// the attach reading what it has (as a reader whose poll fails does), and the next pin
    /// after the poll interval tries again.
    fn tail_timeout(&self) -> Duration {
        self.access.io_timeout.min(Duration::from_secs(2))
    }

    /// A folder's fold of the tail failed: fenced (another attach took the role, and SlateDB
    /// refused the fold before its status said so), the pin fails with it, and the caller goes
    /// on without the role and pins again, rather than serve the image as it was; otherwise as
    /// [`Store::tail_unread`].
    fn fold_unread(&self, e: Error) -> Result<()> {
        if let Error::Fenced(_) = e {
            self.fenced.store(true, Ordering::SeqCst);
            return Err(e);
        }
        self.tail_unread(&e);
        Ok(())
    }

    fn tail_unread(&self, e: &Error) {
        tracing::warn!(
            target: "moraine::store",
            "moraine: reading the commits after the head of {} failed ({e}); reading what this \
             attach has",
            self.url
        );
        *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(std::time::Instant::now());
    }

    /// A reader's pin when the tail is due (RFC 0009, "Readers"): `image`, which holds at least
    /// the folded head `folded`, advanced by the commit objects after it, and the folded head
    /// it then stands on. When the tail cannot be followed (a commit in it was retired, or folded
    /// and deleted) the reader's state is read afresh at once, and the image from it if it passed
    /// the image; when the image is more than [`role::TAKE_OVER_AFTER`] commits past that state,
    /// in the background ([`Store::ask_catch_up`]). A store that does not answer
    /// leaves the attach reading what it has.
    fn follow_tail(&self, image: Arc<Image>, folded: Head) -> Result<(Arc<Image>, Head)> {
        let (image, blocked) = self.read_tail_or_keep(image, folded);
        let backend = self.backend();
        let Backend::Reader(reader) = &*backend else {
            return Ok((image, folded));
        };
        if !blocked {
            self.catch_up_if_far(&backend, image.head(), folded);
            return Ok((image, folded));
        }
        // the state may have moved already (a read afresh in the background)
        let since = reader.read_at();
        let fresh = block_on(within(
            self.tail_timeout(),
            &self.url,
            "reading the lake's state afresh",
            async {
                let now = self.read_head().await?;
                if now.batch_count > image.head().batch_count {
                    return Ok(now);
                }
                reader.refresh(since).await?;
                self.read_head().await
            },
        ));
        let now = match fresh {
            Ok(now) => now,
            Err(e) => {
                // longer than a pin waits (a long WAL to replay): in the background, and the
                // next due pin reads the state it leaves
                self.tail_unread(&e);
                self.ask_catch_up(&backend, image.head().batch_count, folded.batch_count);
                return Ok((image, folded));
            }
        };
        if now.batch_count <= image.head().batch_count {
            return Ok((without_folded_tail(image, now)?, now));
        }
        let (loaded, now) = match self.load_image_at(Some(&image), now) {
            Ok((loaded, now)) => (Arc::new(loaded), now),
            Err(e) => {
                self.tail_unread(&e);
                return Ok((image, folded));
            }
        };
        Ok((self.read_tail_or_keep(loaded, now).0, now))
    }

    /// The image read afresh at the folded head `now`, and that head. A reader's state may name
    /// objects collected since it was read (compacted away): when the read fails, the state is
    /// read afresh and the image read again from it, at its head.
    fn load_image_at(&self, previous: Option<&Image>, now: Head) -> Result<(Image, Head)> {
        let failed = match self.bounded("reading the image", load::load_image(self, previous, now))
        {
            Ok(image) => return Ok((image, now)),
            // (a store's error: an object gone among them; not a corrupt record)
            Err(e @ Error::Storage(_)) => e,
            Err(e) => return Err(e),
        };
        let backend = self.backend();
        let Backend::Reader(reader) = &*backend else {
            return Err(failed);
        };
        tracing::debug!(
            target: "moraine::store",
            "moraine: reading the image of {} failed ({failed}); reading its state afresh",
            self.url
        );
        let since = reader.read_at();
        let now = self
            .bounded("reading the lake's state afresh", async {
                reader.refresh(since).await?;
                self.read_head().await
            })
            .map_err(|e| {
                tracing::warn!(target: "moraine::store", "moraine: {e}");
                failed
            })?;
        let image = self.bounded("reading the image", load::load_image(self, previous, now))?;
        Ok((image, now))
    }

    /// Reads the state of `backend` (a reader, whose folded head is `folded`) afresh in the
    /// background when the image (at `head`) is more than [`role::TAKE_OVER_AFTER`] commits past
    /// it: once per folded head, and again each time the image moves that far more (a folder
    /// may come back).
    fn catch_up_if_far(&self, backend: &Arc<Backend>, head: Head, folded: Head) {
        let (image, folded) = (head.batch_count, folded.batch_count);
        if image.saturating_sub(folded) <= role::TAKE_OVER_AFTER {
            return;
        }
        let last = *self.catch_up.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|c| {
            c.folded == folded && image.saturating_sub(c.image) <= role::TAKE_OVER_AFTER
        }) {
            return;
        }
        self.ask_catch_up(backend, image, folded);
    }

    /// Reads `backend`'s state (a reader's, at folded head `folded`, with the image at `image`)
    /// afresh in the background, within the time limit, unless such a read is running; then
    /// decides whether to take the folder role ([`Store::take_over_after_catch_up`]).
    fn ask_catch_up(&self, backend: &Arc<Backend>, image: u64, folded: u64) {
        if self.catching_up.swap(true, Ordering::SeqCst) {
            return;
        }
        let running = Running(self.catching_up.clone());
        let asked = CatchUp { folded, image };
        *self.catch_up.lock().unwrap_or_else(|p| p.into_inner()) = Some(asked);
        let (backend, me, record) = (backend.clone(), self.me.clone(), self.catch_up.clone());
        let (limit, url) = (self.access.io_timeout, self.url.clone());
        let span = tracing::debug_span!(target: "moraine::store", parent: None, "moraine.reader.catch_up", store = %url);
        runtime().spawn(
            async move {
                let _running = running;
                let Backend::Reader(reader) = &*backend else {
                    return;
                };
                let since = reader.read_at();
                let read = within(limit, &url, "reading the lake's state afresh", async {
                    reader.refresh(since).await
                })
                .await;
                if let Err(e) = read {
                    tracing::warn!(
                        target: "moraine::store",
                        "moraine: reading the state of {url} afresh failed ({e}); the next pins \
                         follow the tail as before"
                    );
                    // asked again at the next pin that finds the image far
                    *record.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    return;
                }
                if let Some(store) = me.upgrade() {
                    // (the store is let go on the blocking thread, never on a runtime thread)
                    let _ = runtime()
                        .spawn_blocking(move || store.take_over_after_catch_up(asked))
                        .await;
                }
            }
            .instrument(span),
        );
    }

    /// [`Store::read_tail`] within [`Store::tail_timeout`], else `image` as it is (and not
    /// blocked).
    fn read_tail_or_keep(&self, image: Arc<Image>, folded: Head) -> (Arc<Image>, bool) {
        let read = block_on(within(
            self.tail_timeout(),
            &self.url,
            "reading the commits after the head",
            self.read_tail(image.clone(), folded),
        ));
        read.unwrap_or_else(|e| {
            self.tail_unread(&e);
            (image, false)
        })
    }

    /// `image`, which holds at least the folded head `folded`, advanced by every commit
    /// object after it (RFC 0004 v3): one read when nothing was committed since. An image
    /// whose commits the folded state now holds reads its history from that state alone.
    /// Also whether the tail stopped short: a commit after the image was retired, or folded and
    /// deleted (only the folded state holds it).
    async fn read_tail(&self, image: Arc<Image>, folded: Head) -> Result<(Arc<Image>, bool)> {
        let started = std::time::Instant::now();
        let from = image.head().batch_count;
        let mut image = without_folded_tail(image, folded)?;
        let mut tail = log::Tail::from(&self.objects, image.head().batch_count + 1);
        while let Some(commit) = tail.next().await? {
            if commit.retired {
                // a reclaim retired it: its writes are in SlateDB's state
                *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(started);
                return Ok((image, true));
            }
            tracing::debug!(
                target: "moraine::store",
                batch = commit.head.batch_count,
                "moraine: a commit read from the lake's tail"
            );
            image = Arc::new(image.advance_unfolded(&commit.writes, commit.head)?);
            self.met_another_writer();
        }
        if image.head().batch_count > from {
            tracing::debug!(
                target: "moraine::store",
                store = %self.url,
                "moraine: followed the lake's tail from batch {from} to {}",
                image.head().batch_count
            );
        }
        let reached = self.tail_ends_at(image.head().batch_count, started).await?;
        *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(started);
        Ok((image, !reached))
    }

    /// The tail read from `started` found no commit object after `batch`. That confirms this
    /// attach's view unless its last confirmation is older than half of
    /// [`log::DELETE_AFTER`]: then the object after `batch` may have been written, folded and
    /// deleted meanwhile, and a listing says whether any later one exists (the newest are never
    /// deleted). A view a later commit passed stays unconfirmed: this attach commits nothing
    /// until its reader of the folded state has caught up. Whether the view was confirmed.
    pub(super) async fn tail_ends_at(
        &self,
        batch: u64,
        started: std::time::Instant,
    ) -> Result<bool> {
        if !self.tail_is_confirmed() {
            if let Some(later) = self.objects.first_commit_after(batch).await? {
                tracing::warn!(
                    target: "moraine::store",
                    "moraine: {} holds commit {later}, past this attach's view (batch {batch}), \
                     and the commits between are folded: reading the folded state again",
                    self.url
                );
                return Ok(false);
            }
        }
        self.confirm_tail(started);
        Ok(true)
    }

    /// Test hook: as if this attach's view of the tail was last confirmed `ago`.
    #[cfg(test)]
    pub(crate) fn age_tail_confirmation_for_test(&self, ago: Duration) {
        *self.tail_confirmed.lock().unwrap() = Some(std::time::Instant::now() - ago);
    }

    /// This attach's view of the lake's tail was read to its end at `at`.
    pub(super) fn confirm_tail(&self, at: std::time::Instant) {
        let mut confirmed = self
            .tail_confirmed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if confirmed.is_none_or(|c| c < at) {
            *confirmed = Some(at);
        }
    }

    /// Whether this attach's view of the tail was confirmed within half of
    /// [`log::DELETE_AFTER`] (see [`Store::tail_ends_at`]).
    pub(super) fn tail_is_confirmed(&self) -> bool {
        let confirmed = *self
            .tail_confirmed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        confirmed.is_some_and(|at| at.elapsed() < log::DELETE_AFTER / 2)
    }
}

/// `image` reading its history from the state at the folded head `folded` alone once that
/// state holds every commit of it (the commits it took from the lake's tail are folded).
fn without_folded_tail(image: Arc<Image>, folded: Head) -> Result<Arc<Image>> {
    if image.has_tail() && image.head().batch_count <= folded.batch_count {
        return Ok(Arc::new(image.without_tail()?));
    }
    Ok(image)
}

/// Serve the live rows an attach's first queries read ([`Image::warm`]) on a blocking thread of
/// the runtime, while DuckDB runs DuckLake's attach on its own thread: a first read of a table
/// the warm-up is serving waits for it rather than serving the table again.
pub(super) fn warm_in_background(image: &Arc<Image>, url: &str) {
    let image = image.clone();
    let span =
        tracing::debug_span!(target: "moraine::store", parent: None, "moraine.warm", store = %url);
    runtime().spawn_blocking(move || {
        let _enter = span.enter();
        image.warm();
    });
}
