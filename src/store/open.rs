//! Opening a store: the process-wide table of open stores (an attach of a URL already open
//! shares it), the checks of a store URL's location, and SlateDB's handle opened on it, a writer
//! creating the store (its `sys/format` marker and empty head) when the location is empty.

use super::*;
use crate::url::{self, StoreUrl};
use slatedb::config::Settings;
use std::collections::HashMap;
use std::sync::OnceLock;

type Registry = Mutex<HashMap<(String, bool), Weak<Store>>>;

fn open_stores() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(HashMap::new()))
}

pub(super) fn not_a_store(location: impl Into<String>, reason: impl Into<String>) -> Error {
    Error::NotAStore {
        location: location.into(),
        reason: reason.into(),
    }
}

/// How long a fold may sit in SlateDB's WAL buffer before SlateDB writes it out. A commit is
/// durable once its commit object exists (RFC 0004 v3), so the folder's writes into SlateDB
/// need not reach the store one by one: they go out together, once per this interval, after
/// every [`super::commit::FOLDS_PER_WAL_FLUSH`] folds, and before anything that needs them
/// durable (a checkpoint, which deletes commit objects; a reclaim, after its checkpoint; a
/// close).
pub(super) const WAL_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// How often the folder's SlateDB writer reads the manifest (and, on object storage, its GC
/// boundary): two requests a poll. It learns there of its compactor's work and of a fence; a
/// fence needs no prompt notice (RFC 0004 v3: the commit objects decide every commit, and the
/// folder's next WAL write meets the fence within [`WAL_FLUSH_INTERVAL`] when it folds), so the
/// poll is slow: at 500 ms it was about a quarter of a request per commit on S3.
pub(super) const WRITER_MANIFEST_POLL: Duration = Duration::from_secs(5);

/// Writer settings: SlateDB flushes its WAL every [`WAL_FLUSH_INTERVAL`] and reads the manifest
/// every [`WRITER_MANIFEST_POLL`].
pub(super) fn writer_settings(codec: Codec) -> Settings {
    Settings {
        compression_codec: codec.slatedb(),
        flush_interval: Some(WAL_FLUSH_INTERVAL),
        manifest_poll_interval: WRITER_MANIFEST_POLL,
        // moraine runs the collector itself (`start_collector`)
        garbage_collector_options: None,
        // and the compactor (`compactor.rs`)
        compactor_options: None,
        ..Settings::default()
    }
}

/// Check a local directory before SlateDB touches it.
fn check_local_dir(path: &Path, read_only: bool) -> Result<()> {
    let shown = path.display().to_string();
    match std::fs::metadata(path) {
        Ok(m) if !m.is_dir() => Err(not_a_store(shown, "it is a regular file, not a directory")),
        Ok(_) => {
            let entries: Vec<String> = std::fs::read_dir(path)
                .map_err(|e| Error::Storage(format!("cannot list {shown}: {e}")))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if entries.is_empty() {
                if read_only {
                    return Err(not_a_store(
                        shown,
                        "the directory is empty (no lake was created here)",
                    ));
                }
                return Ok(());
            }
            if !entries.iter().any(|e| e == "manifest") {
                return Err(not_a_store(
                    shown,
                    "the directory is not empty and holds no SlateDB manifest",
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if read_only {
                return Err(not_a_store(shown, "nothing exists at this path"));
            }
            std::fs::create_dir_all(path).map_err(|e| {
                Error::Storage(format!("cannot create the lake directory {shown}: {e}"))
            })
        }
        Err(e) => Err(Error::Storage(format!("cannot inspect {shown}: {e}"))),
    }
}

impl Store {
    /// Open (or, for a writer, create) the lake at `url`.
    ///
    /// An open store is shared: opening the same canonical URL with the same mode while a
    /// previous `Arc<Store>` is alive returns that store (a second SlateDB writer would fence
    /// the first).
    pub fn open(url: &str, read_only: bool) -> Result<Arc<Store>> {
        Store::open_with(url, read_only, &[])
    }

    /// [`Store::open`] with the options the attach passes: for an `s3://` URL, the fields of
    /// the DuckDB secret that covers it (`s3.*`, see [`crate::s3::S3Secret`]).
    pub fn open_with(
        url: &str,
        read_only: bool,
        options: &[(String, String)],
    ) -> Result<Arc<Store>> {
        let _span = tracing::debug_span!(
            target: "moraine::store",
            "moraine.attach",
            url,
            mode = if read_only { "reader" } else { "writer" }
        )
        .entered();
        let parsed = url::parse(url)?;
        let access = Access {
            secret: crate::s3::S3Secret::from_options(options)?,
            io_timeout: io_timeout_option(options)?,
            max_commit_bytes: crate::limits::max_commit_option(options)?,
            reader_poll: reader_poll_option(options)?,
            reclaim_interval: reclaim::reclaim_interval_option(options)?,
            // (checked for every attach; a READ_ONLY one writes nothing, so it shares a store
            // whatever its setting)
            compression: match compression_option(options)? {
                _ if read_only => crate::compression::DEFAULT,
                codec => codec,
            },
        };
        let canonical = parsed.canonical();
        let mut reg = open_stores().lock().unwrap_or_else(|p| p.into_inner());
        reg.retain(|_, w| w.strong_count() > 0);
        if let Some(existing) = reg
            .get(&(canonical.clone(), read_only))
            .and_then(Weak::upgrade)
        {
            if existing.access != access {
                return Err(Error::InvalidInput(format!(
                    "{canonical} is already attached in this process with {}; DETACH it \
                     first, or attach it with the same secret, the same http_proxy settings \
                     and the same moraine_io_timeout, moraine_max_commit_size, \
                     moraine_reader_poll_interval, moraine_reclaim_interval and \
                     moraine_compression",
                    match &existing.access.secret {
                        Some(s) => format!("secret '{}'", s.name),
                        None => "no secret".to_string(),
                    }
                )));
            }
            if existing.shareable() {
                return Ok(existing);
            }
            // an attach whose commit had an unknown outcome, or whose writer another process
            // fenced, is not handed out again: a new open reads the store's truth (and fences
            // the broken writer)
        }
        let mut local = None;
        // (an S3 store's newest checkpoint is read beside the probe: one round trip less)
        let mut prefetched = None;
        let (object_store, location): (Arc<dyn ObjectStore>, String) = match &parsed {
            StoreUrl::Local(path) => {
                check_local_dir(path, read_only)?;
                let fs = Arc::new(local::LocalStore::new(path).map_err(|e| {
                    Error::Storage(format!("cannot open directory {}: {e}", path.display()))
                })?);
                local = Some(fs.clone());
                (fs, path.display().to_string())
            }
            StoreUrl::Memory(name) => {
                if read_only && !url::memory_store_exists(name) {
                    return Err(not_a_store(
                        canonical.clone(),
                        "no lake was created under this name in this process",
                    ));
                }
                (url::memory_store(name), canonical.clone())
            }
            StoreUrl::S3 { bucket, prefix } => {
                let secret = access.secret.as_ref().ok_or_else(|| Error::Url {
                    url: url.to_string(),
                    reason: format!(
                        "no DuckDB secret of type s3 covers it; create one first, for example \
                         CREATE SECRET (TYPE s3, KEY_ID '...', SECRET '...', REGION '...', \
                         SCOPE '{canonical}'), or name one with META_SECRET"
                    ),
                })?;
                let store =
                    crate::s3::object_store(url, bucket, prefix, secret, access.io_timeout)?;
                let prefetch = runtime().spawn(prefetch_checkpoint(Objects {
                    store: store.clone(),
                    local: None,
                }));
                block_on(crate::s3::probe(
                    &store,
                    &canonical,
                    secret,
                    access.io_timeout,
                ))
                .inspect_err(|_| prefetch.abort())?;
                prefetched = Some(prefetch);
                (store, canonical.clone())
            }
        };
        // a local directory cannot update SlateDB's GC boundary objects in place
        let boundary_files = !matches!(parsed, StoreUrl::Local(_));
        let store = Store::on_backend(
            Objects {
                store: object_store,
                local,
            },
            boundary_files,
            read_only,
            url,
            &canonical,
            location,
            access,
            prefetched,
        )?;
        reg.insert((canonical, read_only), Arc::downgrade(&store));
        Ok(store)
    }

    /// Open (or create) a lake on an object store the caller supplies, under `label` in
    /// messages. Test hook for fault injection at the object-store boundary: not shared through
    /// the process-wide table, so every call opens its own SlateDB handle (a second writer
    /// fences the first, as across processes).
    #[cfg(test)]
    pub(crate) fn open_on(
        object_store: Arc<dyn ObjectStore>,
        read_only: bool,
        label: &str,
    ) -> Result<Arc<Store>> {
        Store::open_on_limited(object_store, read_only, label, DEFAULT_IO_TIMEOUT)
    }

    /// [`Store::open_on`] with the time limit `io_timeout`.
    #[cfg(test)]
    pub(crate) fn open_on_limited(
        object_store: Arc<dyn ObjectStore>,
        read_only: bool,
        label: &str,
        io_timeout: Duration,
    ) -> Result<Arc<Store>> {
        Store::on_backend(
            Objects {
                store: object_store,
                local: None,
            },
            true,
            read_only,
            label,
            label,
            label.to_string(),
            Access {
                secret: None,
                io_timeout,
                max_commit_bytes: crate::limits::MAX_COMMIT_BYTES,
                reader_poll: DEFAULT_READER_POLL,
                reclaim_interval: reclaim::DEFAULT_RECLAIM_INTERVAL,
                compression: crate::compression::DEFAULT,
            },
            None,
        )
    }

    /// Opens SlateDB on `objects` (under its own scope of the SST cache, given back if the
    /// open fails) and wraps it; `location` names it in errors. `prefetched` is the read of
    /// the newest checkpoint when the caller started it.
    #[allow(clippy::too_many_arguments)]
    fn on_backend(
        objects: Objects,
        boundary_files: bool,
        read_only: bool,
        url: &str,
        canonical: &str,
        location: String,
        access: Access,
        prefetched: Option<Prefetch>,
    ) -> Result<Arc<Store>> {
        let cache_scope = crate::sst_cache::new_scope();
        let metrics = Arc::new(slatedb_common::metrics::DefaultMetricsRecorder::new());
        // the attach's image load needs the newest checkpoint: read it while SlateDB opens
        let prefetched =
            prefetched.unwrap_or_else(|| runtime().spawn(prefetch_checkpoint(objects.clone())));
        let source = Source {
            object_store: objects.store.clone(),
            location: location.clone(),
            cache_scope,
            metrics: metrics.clone(),
            compression: access.compression,
        };
        // an attach starts from that checkpoint alone when it can (RFC 0009, "An attach that
        // reads what its first query needs"): SlateDB's reader opens at its first read of
        // history, and a read-write attach opens SlateDB's writer (the folder role) at its
        // first commit
        let (start, prefetched) =
            start_without_slatedb(prefetched, &location, access.io_timeout)
                .inspect_err(|_| crate::sst_cache::shared().drop_scope(cache_scope))?;
        let backend = match &start {
            Some(_) => Ok(Backend::Reader(Box::new(Reader::unopened(
                source,
                STORE_FORMAT,
            )))),
            None => block_on(within(
                access.io_timeout,
                &location,
                "opening SlateDB",
                open_backend(&source, read_only),
            )),
        }
        .inspect_err(|_| {
            prefetched.abort();
            crate::sst_cache::shared().drop_scope(cache_scope)
        })?;
        let store = Arc::new_cyclic(|me| Store {
            me: me.clone(),
            url: url.to_string(),
            canonical: canonical.to_string(),
            read_only,
            closed: std::sync::atomic::AtomicBool::new(false),
            row_locks: Default::default(),
            handle: std::sync::RwLock::new(Arc::new(backend)),
            objects,
            boundary_files,
            checkpointed: Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX)),
            checkpointing: Mutex::new(None),
            prefetched: Mutex::new(Some(prefetched)),
            uncheckpointed_since: Mutex::new(None),
            collector: Mutex::new(None),
            compactor: compactor::WriterCompactor::new(access.compression),
            image: Mutex::new(None),
            commit_lock: Mutex::new(()),
            reclaiming: Mutex::new(()),
            snapshots: Default::default(),
            head_installed_at: Default::default(),
            unflushed_commits: Default::default(),
            unflushed_folds: Default::default(),
            wal_flushing: Default::default(),
            memtable_flushing: Default::default(),
            cache_scope,
            image_unsure: Default::default(),
            access,
            broken: Default::default(),
            pending: Default::default(),
            fold_stuck: Default::default(),
            catch_up: Default::default(),
            catching_up: Default::default(),
            tail_checked: Default::default(),
            others_seen: Default::default(),
            tail_confirmed: Default::default(),
            fenced: Default::default(),
            metrics,
            commits: Default::default(),
            last_commit_micros: Default::default(),
            started_from: start.as_ref().map(|(image, _)| image.head()),
            role_at_first_commit: (start.is_some() && !read_only).into(),
            format_refused: Default::default(),
            #[cfg(test)]
            head_reads: Default::default(),
        });
        if let Some((image, no_tail_since)) = start {
            let image = Arc::new(image);
            store.install_image(Some(image.clone()));
            if let Some(at) = no_tail_since {
                // the listing beside the checkpoint's read found no commit after it: the tail
                // was read to its end then
                store.confirm_tail(at);
                *store.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
            }
            pin::warm_in_background(&image, &store.url);
        }
        if let Backend::Writer(db, _) = &*store.backend() {
            // commits whose objects a writer killed before SlateDB took them left behind
            let folded = store.bounded("folding the commits after the head", store.fold_tail(db));
            match folded {
                Ok(_) => {}
                // another read-write attach took the folder role meanwhile
                Err(Error::Fenced(_)) => {
                    store.go_on_without_the_role()?;
                    return Ok(store);
                }
                Err(e) => {
                    let _ = block_on(store.backend().close());
                    return Err(e);
                }
            }
            *store.collector.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(start_collector(&store));
            // never at the open, however full L0 is: commits and the close start it for their
            // flushes, and the timer bounds the rarer ones (`compactor.rs`)
            store.compactor.start_later(&store);
        }
        Ok(store)
    }

    /// Whether a new ATTACH in this process may share this open store: not after a commit of
    /// unknown outcome, and not once SlateDB has closed it (a writer another one fenced).
    fn shareable(&self) -> bool {
        !self.broken.load(Ordering::SeqCst) && self.close_reason().is_none()
    }
}

/// The image a `READ_ONLY` attach starts from without SlateDB: the newest checkpoint the
/// read ahead found, when it is of this build's store format (`load::image_to_start_from`),
/// and when the listing beside it found no commit object after it, the time that listing
/// began; else `None`, and the read ahead handed back for the load after SlateDB's open.
/// Waits for the read ahead within the time limit.
#[allow(clippy::type_complexity)]
fn start_without_slatedb(
    prefetched: Prefetch,
    location: &str,
    limit: Duration,
) -> Result<(Option<(Image, Option<std::time::Instant>)>, Prefetch)> {
    let got = block_on(within(
        limit,
        location,
        "reading the newest image checkpoint",
        async { Ok(prefetched.await.ok().flatten()) },
    ))?;
    let start = got.as_ref().and_then(|newest| {
        let span = tracing::debug_span!(
            target: "moraine::store",
            "moraine.image.start",
            store = location,
            to = tracing::field::Empty
        );
        let _enter = span.enter();
        let image = load::image_to_start_from(&newest.path, newest.bytes.clone())?;
        span.record("to", image.head().batch_count);
        Some((image, newest.no_tail_since))
    });
    let handed_back = match start {
        Some(_) => None,
        None => got,
    };
    Ok((start, runtime().spawn(async move { handed_back })))
}

async fn open_backend(source: &Source, read_only: bool) -> Result<Backend> {
    if read_only {
        return open_checked_reader(source).await;
    }
    let location = source.location.clone();
    let db = match open_writer(source).await {
        Ok(db) => db,
        // another read-write attach opened the lake while this one did: it holds the folder
        // role, and this attach commits without it (RFC 0004 v3)
        Err(Error::Fenced(_)) => return open_checked_reader(source).await,
        Err(e) => return Err(e),
    };
    match db.get(keys::sys_format()).await? {
        Some(v) => {
            let backend = Backend::writer(db);
            if let Err(e) = check_format(&location, &backend, &v).await {
                let _ = backend.close().await;
                return Err(e);
            }
            return Ok(backend);
        }
        None => {
            // A fresh SlateDB database becomes a moraine store; one holding other keys is not.
            let mut it = db.scan(..).await?;
            if let Some(kv) = it.next().await? {
                drop(it);
                let _ = db.close().await;
                return Err(not_a_store(
                    location,
                    format!(
                        "it is a SlateDB database without moraine's sys/format marker (first key {:?})",
                        String::from_utf8_lossy(&kv.key)
                    ),
                ));
            }
            drop(it);
            let mut batch = WriteBatch::new();
            batch.put(keys::sys_format(), STORE_FORMAT.as_bytes());
            batch.put(keys::sys_head(), Head::default().encode());
            let handle = db.write(batch).await?;
            db.flush().await?;
            handle.await_durable().await?;
        }
    }
    Ok(Backend::writer(db))
}

/// [`open_reader`] on a store that must hold moraine's format marker.
async fn open_checked_reader(source: &Source) -> Result<Backend> {
    let backend = open_reader(source).await?;
    let location = source.location.clone();
    let checked = match backend.get(&keys::sys_format()).await? {
        Some(v) => check_format(&location, &backend, &v).await,
        None => Err(not_a_store(
            location,
            "it holds no moraine sys/format marker",
        )),
    };
    if let Err(e) = checked {
        let _ = backend.close().await;
        return Err(e);
    }
    Ok(backend)
}

/// A reader of the lake's SlateDB database (RFC 0009, "Readers").
pub(super) async fn open_reader(source: &Source) -> Result<Backend> {
    let reader = Reader::open(source.clone())
        .await
        .map_err(|e| match e.kind() {
            slatedb::ErrorKind::Invalid | slatedb::ErrorKind::Data => not_a_store(
                source.location.clone(),
                format!("SlateDB cannot open it ({e})"),
            ),
            _ => Error::from(e),
        })?;
    Ok(Backend::Reader(Box::new(reader)))
}

/// SlateDB's writer of the lake's database: opening it fences the one before (RFC 0004 v3: the
/// folder role moves).
pub(super) async fn open_writer(source: &Source) -> Result<Db> {
    Ok(Db::builder("", source.object_store.clone())
        .with_settings(writer_settings(source.compression))
        .with_db_cache(crate::sst_cache::shared(), source.cache_scope)
        .with_metrics_recorder(source.metrics.clone())
        .build()
        .await?)
}
