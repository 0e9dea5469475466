//! A store in a local directory: object_store's `LocalFileSystem`, with a cheaper listing.
//!
//! SlateDB lists whole directories when it opens a store (every manifest, every WAL object),
//! and a local store keeps its manifests for an hour (`gc_options`), so an attach lists
//! hundreds of files. `LocalFileSystem` pays three `statx` calls and a URL round trip per file
//! for that; this listing pays one `statx` per file and builds the same [`ObjectMeta`]s (the
//! same names, sizes, times and e-tags, in the same order). It covers the names SlateDB and
//! moraine write (letters, digits, `.`, `-`, `_`, and the `<name>#<digits>` files of writes
//! under way, which it skips as `LocalFileSystem` does); a directory holding anything else,
//! or a symbolic link, is listed by `LocalFileSystem` itself.
//!
//! On a local disk's file system ([`on_local_disk`]), reads of up to [`INLINE_READ_MAX`]
//! bytes, and listings, run on the thread that asks:
//! `LocalFileSystem` hands every call to tokio's blocking pool and back (a read, twice: the
//! open and the read), and an attach makes about fifty such calls one after another, each two
//! thread wake-ups, which cost more than the read of a cached file does (an attach woke
//! threads some 200 times where DuckDB's own file catalog wakes about 20). A larger read still
//! goes to the blocking pool, so that it never holds up a runtime thread for long. On any
//! other file system (a network or FUSE mount, where a read can hang) every call goes through
//! the blocking pool, so the store's time limit bounds it. Writes, deletes, copies and renames
//! go to `LocalFileSystem` unchanged.

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct LocalStore {
    inner: Arc<LocalFileSystem>,
    root: PathBuf,
    /// Whether the directory is on a local disk's file system ([`on_local_disk`]), whose reads
    /// run on the calling thread; any other (a network or FUSE mount, which can hang) reads
    /// through `LocalFileSystem`, where the store's time limit bounds every read.
    reads_here: bool,
}

impl LocalStore {
    /// The store in directory `root` (which exists). Both listings start from the same
    /// canonical directory: `LocalFileSystem` is given the one this listing uses.
    pub(crate) fn new(root: &std::path::Path) -> Result<LocalStore> {
        let root = std::fs::canonicalize(root).map_err(|source| object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(source),
        })?;
        Ok(LocalStore {
            inner: Arc::new(LocalFileSystem::new_with_prefix(&root)?),
            reads_here: on_local_disk(&root),
            root,
        })
    }

    /// The whole object at `location`, mapped into memory rather than read, or `None` when the
    /// location is not a plain path under the directory (the caller then reads it through
    /// `LocalFileSystem`). A fresh process reading a checkpoint (many MB) pays a page fault for
    /// every page of a buffer it reads into; a mapping shares the file system's cached pages,
    /// and a page is faulted in only when it is read. Only for objects that are never changed
    /// in place: `LocalFileSystem` writes an object to a staging file and renames it over the
    /// name, and a deleted file stays readable through a mapping of it.
    pub(crate) fn map(&self, location: &Path) -> Option<std::io::Result<Bytes>> {
        Some(map_file(&self.file_path(location)?))
    }

    /// The file `LocalFileSystem` keeps the object at `location` in, when every part of the
    /// location is a plain name (else `None`: the caller asks `LocalFileSystem`).
    fn file_path(&self, location: &Path) -> Option<PathBuf> {
        let mut file = self.root.clone();
        for part in location.parts() {
            if !plain_name(part.as_ref()) {
                return None;
            }
            file.push(part.as_ref());
        }
        Some(file)
    }

    /// The objects under `prefix` (after `offset`), or `None` when the fast listing does not
    /// cover what it found (the caller then asks `LocalFileSystem`).
    fn list_fast(
        root: &std::path::Path,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> Option<Vec<ObjectMeta>> {
        let mut dir = root.to_path_buf();
        let mut location = String::new();
        if let Some(prefix) = prefix {
            for part in prefix.parts() {
                if !plain_name(part.as_ref()) {
                    return None;
                }
                dir.push(part.as_ref());
                location.push_str(part.as_ref());
                location.push('/');
            }
        }
        let mut out = Vec::new();
        // depth first, each directory's entries in the order the file system gives them (as
        // walkdir visits them)
        walk(&dir, &location, offset, &mut out)?;
        Some(out)
    }
}

/// A name the fast listing maps to a path part as `LocalFileSystem` does: unchanged.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// A file `LocalFileSystem` hides from listings: one it is writing (`<name>#<digits>`).
fn staged_upload(name: &str) -> bool {
    match name.split_once('#') {
        Some((_, suffix)) => !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

fn walk(
    dir: &std::path::Path,
    location: &str,
    offset: Option<&Path>,
    out: &mut Vec<ObjectMeta>,
) -> Option<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        // nothing under the prefix, or a directory deleted while it was listed: nothing there
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(()),
        // (a prefix naming a file, among others)
        Err(_) => return None,
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        let name = entry.file_name();
        let name = name.to_str()?;
        let file_type = entry.file_type().ok()?;
        if file_type.is_symlink() {
            return None;
        }
        if file_type.is_dir() {
            if !plain_name(name) {
                return None;
            }
            walk(&entry.path(), &format!("{location}{name}/"), offset, out)?;
            continue;
        }
        if staged_upload(name) {
            continue;
        }
        if !file_type.is_file() || !plain_name(name) {
            return None;
        }
        let path = Path::from(format!("{location}{name}"));
        if offset.is_some_and(|o| path <= *o) {
            continue;
        }
        let metadata = match entry.metadata() {
            Ok(m) => m,
            // deleted since the directory was read
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        out.push(object_meta(path, &metadata)?);
    }
    Some(())
}

/// Whether `dir` is on a file system of a local disk or of memory, whose reads are a copy
/// from the page cache or a disk read the kernel completes (ext2/3/4, XFS, Btrfs, ZFS, F2FS,
/// tmpfs, ramfs, overlayfs). Anything else, or a directory whose file system cannot be told,
/// is not: a network or FUSE file system can leave a read waiting indefinitely.
fn on_local_disk(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const LOCAL: [i64; 8] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // XFS
        0x9123_683E, // Btrfs
        0x2FC1_2FC1, // ZFS
        0xF2F5_2010, // F2FS
        0x0102_1994, // tmpfs
        0x8584_58F6, // ramfs
        0x794C_7630, // overlayfs
    ];
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path and a zeroed statfs the call fills
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut fs) } != 0 {
        return false;
    }
    #[allow(clippy::unnecessary_cast)]
    LOCAL.contains(&(fs.f_type as i64))
}

/// The most a read runs on the calling thread (module doc); a larger one goes to tokio's
/// blocking pool as `LocalFileSystem` sends it.
pub(crate) const INLINE_READ_MAX: u64 = 1 << 20;

/// `LocalFileSystem::get_opts`, on this thread: the file opened, its metadata checked against
/// the options, and a range of up to [`INLINE_READ_MAX`] bytes read here; a larger range (or
/// a `head`) is left in the file for the caller to read as `LocalFileSystem` has it read.
fn get_here(location: &Path, path: PathBuf, options: GetOptions) -> Result<GetResult> {
    let file = open_file(&path)?;
    let metadata = file.metadata().map_err(|e| open_error(e, &path))?;
    if metadata.is_dir() {
        let is_dir = std::io::Error::new(std::io::ErrorKind::NotFound, "is directory");
        return Err(open_error(is_dir, &path));
    }
    let meta = object_meta(location.clone(), &metadata).ok_or_else(|| {
        generic(std::io::Error::other(format!(
            "{}: no modification time",
            path.display()
        )))
    })?;
    options.check_preconditions(&meta)?;
    let range = match &options.range {
        Some(r) => r.as_range(meta.size).map_err(generic)?,
        None => 0..meta.size,
    };
    let payload = if options.head || range.end - range.start > INLINE_READ_MAX {
        GetResultPayload::File(file, path)
    } else {
        let bytes = read_at(&file, &path, range.clone())?;
        GetResultPayload::Stream(futures::stream::once(async move { Ok(bytes) }).boxed())
    };
    Ok(GetResult {
        payload,
        attributes: Default::default(),
        range,
        meta,
        extensions: Default::default(),
    })
}

fn open_file(path: &std::path::Path) -> Result<std::fs::File> {
    std::fs::File::open(path).map_err(|e| open_error(e, path))
}

/// An error opening a file as `LocalFileSystem` reports it: a missing file is `NotFound`.
fn open_error(source: std::io::Error, path: &std::path::Path) -> object_store::Error {
    match source.kind() {
        std::io::ErrorKind::NotFound => object_store::Error::NotFound {
            path: path.to_string_lossy().to_string(),
            source: Box::new(source),
        },
        _ => generic(std::io::Error::new(
            source.kind(),
            format!("unable to open {}: {source}", path.display()),
        )),
    }
}

fn generic(source: impl std::error::Error + Send + Sync + 'static) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: Box::new(source),
    }
}

/// The bytes of `range` of `file`, all of them.
fn read_at(file: &std::fs::File, path: &std::path::Path, range: Range<u64>) -> Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let len = usize::try_from(range.end.saturating_sub(range.start))
        .map_err(|_| generic(std::io::Error::other("range too large")))?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, range.start).map_err(|e| {
        generic(std::io::Error::new(
            e.kind(),
            format!("reading {range:?} of {}: {e}", path.display()),
        ))
    })?;
    Ok(buf.into())
}

/// What `LocalFileSystem` says of a file: its size, modification time and e-tag
/// (`"<inode>-<mtime in microseconds>-<size>"` in hex).
fn object_meta(location: Path, metadata: &std::fs::Metadata) -> Option<ObjectMeta> {
    use std::os::unix::fs::MetadataExt;
    let modified = metadata.modified().ok()?;
    let micros = modified
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or_default();
    Some(ObjectMeta {
        location,
        last_modified: modified.into(),
        size: metadata.len(),
        e_tag: Some(format!(
            "\"{:x}-{:x}-{:x}\"",
            metadata.ino(),
            micros,
            metadata.len()
        )),
        version: None,
    })
}

impl std::fmt::Display for LocalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

#[async_trait]
impl ObjectStore for LocalStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        match self.file_path(location) {
            Some(path) if self.reads_here => get_here(location, path, options),
            _ => self.inner.get_opts(location, options).await,
        }
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> Result<Vec<bytes::Bytes>> {
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        match self.file_path(location) {
            Some(path) if self.reads_here && total <= INLINE_READ_MAX => {
                let file = open_file(&path)?;
                ranges
                    .iter()
                    .map(|r| read_at(&file, &path, r.clone()))
                    .collect()
            }
            _ => self.inner.get_ranges(location, ranges).await,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.list_from(prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.list_from(prefix, Some(offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

impl LocalStore {
    fn list_from(
        &self,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let (inner, root, here) = (self.inner.clone(), self.root.clone(), self.reads_here);
        let (prefix, offset) = (prefix.cloned(), offset.cloned());
        futures::stream::once(async move {
            // on a local disk, on this thread: a listing costs less than two thread wake-ups
            let listed = if here {
                LocalStore::list_fast(&root, prefix.as_ref(), offset.as_ref())
            } else {
                let (prefix, offset) = (prefix.clone(), offset.clone());
                tokio::task::spawn_blocking(move || {
                    LocalStore::list_fast(&root, prefix.as_ref(), offset.as_ref())
                })
                .await
                .ok()
                .flatten()
            };
            match listed {
                Some(objects) => futures::stream::iter(objects.into_iter().map(Ok)).boxed(),
                None => match &offset {
                    Some(o) => inner.list_with_offset(prefix.as_ref(), o),
                    None => inner.list(prefix.as_ref()),
                },
            }
        })
        .flatten()
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;
    use object_store::{GetRange, ObjectStoreExt};

    async fn listed(
        store: &dyn ObjectStore,
        prefix: Option<&str>,
        offset: Option<&str>,
    ) -> Vec<ObjectMeta> {
        let prefix = prefix.map(Path::from);
        // in the order listed: the fast listing keeps walkdir's
        match offset {
            Some(o) => store.list_with_offset(prefix.as_ref(), &Path::from(o)),
            None => store.list(prefix.as_ref()),
        }
        .try_collect()
        .await
        .unwrap()
    }

    #[test]
    fn maps_what_local_file_system_reads() {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(maps_alike());
    }

    async fn maps_alike() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path()).unwrap();
        let name = Path::from("moraine/image/00000000000000000151");
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        store.put(&name, body.clone().into()).await.unwrap();
        let read = store.get(&name).await.unwrap().bytes().await.unwrap();
        let mapped = store.map(&name).unwrap().unwrap();
        assert_eq!(mapped, read);
        assert_eq!(&mapped[..], &body[..]);
        // a slice keeps the mapping, which outlives the file's deletion and a new object put
        // under its name (a rename over it, as LocalFileSystem writes)
        let tail = mapped.slice(299_990..);
        drop(mapped);
        store.delete(&name).await.unwrap();
        store.put(&name, "other".into()).await.unwrap();
        assert_eq!(&tail[..], &body[299_990..]);
        assert_eq!(&store.map(&name).unwrap().unwrap()[..], b"other");
        // an empty object, a missing one, and a name the mapping does not cover
        let empty = Path::from("moraine/image/00000000000000000152");
        store.put(&empty, "".into()).await.unwrap();
        assert!(store.map(&empty).unwrap().unwrap().is_empty());
        let missing = store.map(&Path::from("moraine/image/0")).unwrap();
        assert_eq!(missing.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        assert!(store.map(&Path::from("moraine/.hidden")).is_none());
    }

    #[test]
    fn reads_what_local_file_system_reads() {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(reads_alike());
    }

    /// One get through both stores: the same bytes, metadata and range, or errors of the same
    /// kind.
    async fn get_both(
        fs: &LocalFileSystem,
        here: &LocalStore,
        name: &str,
        options: GetOptions,
    ) -> std::result::Result<(Bytes, ObjectMeta, Range<u64>), String> {
        let name = Path::from(name);
        let got = async |store: &dyn ObjectStore| match store.get_opts(&name, options.clone()).await
        {
            Ok(r) => {
                let (meta, range) = (r.meta.clone(), r.range.clone());
                let bytes = if options.head {
                    Bytes::new()
                } else {
                    r.bytes().await.unwrap()
                };
                Ok((bytes, meta, range))
            }
            Err(e) => Err(format!("{:?}", std::mem::discriminant(&e))),
        };
        let (want, have) = (got(fs).await, got(here).await);
        assert_eq!(have, want, "{name} with {options:?}");
        have
    }

    async fn reads_alike() {
        let dir = tempfile::tempdir().unwrap();
        let fs = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let here = LocalStore::new(dir.path()).unwrap();
        let small: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let large: Vec<u8> = (0..(INLINE_READ_MAX as u32 + 4096))
            .map(|i| (i % 241) as u8)
            .collect();
        fs.put(
            &Path::from("wal/00000000000000000001.sst"),
            small.clone().into(),
        )
        .await
        .unwrap();
        fs.put(&Path::from("compacted/big.sst"), large.clone().into())
            .await
            .unwrap();
        fs.put(&Path::from("empty"), Bytes::new().into())
            .await
            .unwrap();
        let sst = "wal/00000000000000000001.sst";
        let ranged = |r: GetRange| GetOptions {
            range: Some(r),
            ..Default::default()
        };
        // whole objects, ranges of every kind, a head, and a read larger than the inline limit
        let whole = get_both(&fs, &here, sst, GetOptions::default())
            .await
            .unwrap();
        assert_eq!(&whole.0[..], &small[..]);
        assert!(here.reads_here, "a temporary directory is on a local disk");
        for r in [
            GetRange::Bounded(10..4000),
            GetRange::Bounded(4990..9000),
            GetRange::Offset(4000),
            GetRange::Suffix(100),
            GetRange::Suffix(9000),
        ] {
            get_both(&fs, &here, sst, ranged(r)).await.unwrap();
        }
        for r in [
            GetRange::Bounded(10..10),
            GetRange::Bounded(6000..7000),
            GetRange::Offset(5000),
        ] {
            get_both(&fs, &here, sst, ranged(r)).await.unwrap_err();
        }
        let head = GetOptions {
            head: true,
            ..Default::default()
        };
        assert_eq!(get_both(&fs, &here, sst, head).await.unwrap().1, whole.1);
        let big = get_both(&fs, &here, "compacted/big.sst", GetOptions::default()).await;
        assert_eq!(&big.unwrap().0[..], &large[..]);
        get_both(&fs, &here, "empty", GetOptions::default())
            .await
            .unwrap();
        // (read here: a small read comes back read, a large one as the file to read)
        let payload = async |name: &str| here.get(&Path::from(name)).await.unwrap().payload;
        assert!(matches!(payload(sst).await, GetResultPayload::Stream(_)));
        let big = payload("compacted/big.sst").await;
        assert!(matches!(big, GetResultPayload::File(..)));
        // errors: a missing object, a directory, a range past the end, preconditions
        let not_found = get_both(&fs, &here, "wal/absent.sst", GetOptions::default()).await;
        let missing = here.get(&Path::from("wal/absent.sst")).await.unwrap_err();
        assert!(
            matches!(missing, object_store::Error::NotFound { .. }),
            "{missing}"
        );
        assert!(not_found.is_err());
        get_both(&fs, &here, "wal", GetOptions::default())
            .await
            .unwrap_err();
        let head_missing = GetOptions {
            head: true,
            ..Default::default()
        };
        get_both(&fs, &here, "wal/absent.sst", head_missing)
            .await
            .unwrap_err();
        let etag = whole.1.e_tag.clone().unwrap();
        for (if_match, if_none_match) in [
            (Some(etag.clone()), None),
            (Some("\"other\"".to_string()), None),
            (None, Some(etag.clone())),
            (None, Some("\"other\"".to_string())),
        ] {
            let options = GetOptions {
                if_match,
                if_none_match,
                ..Default::default()
            };
            let _ = get_both(&fs, &here, sst, options).await;
        }
        let modified = whole.1.last_modified;
        for (since, unmodified) in [(Some(modified), None), (None, Some(modified))] {
            let options = GetOptions {
                if_modified_since: since,
                if_unmodified_since: unmodified,
                ..Default::default()
            };
            let _ = get_both(&fs, &here, sst, options).await;
        }
        // several ranges at once, within and beyond the inline limit, and past the end
        let path = Path::from(sst);
        let ranges = [0..16, 16..32, 100..120, 0..50, 4999..5000];
        assert_eq!(
            here.get_ranges(&path, &ranges).await.unwrap(),
            fs.get_ranges(&path, &ranges).await.unwrap()
        );
        let path = Path::from("compacted/big.sst");
        let ranges = [0..INLINE_READ_MAX, INLINE_READ_MAX..INLINE_READ_MAX + 10];
        assert_eq!(
            here.get_ranges(&path, &ranges).await.unwrap(),
            fs.get_ranges(&path, &ranges).await.unwrap()
        );
        let kind =
            |r: Result<Vec<Bytes>>| r.map_err(|e| format!("{:?}", std::mem::discriminant(&e)));
        for (name, ranges) in [(sst, vec![4990..5010]), ("wal/absent.sst", vec![0..1])] {
            let path = Path::from(name);
            let want = kind(fs.get_ranges(&path, &ranges).await);
            assert!(want.is_err());
            assert_eq!(kind(here.get_ranges(&path, &ranges).await), want, "{name}");
        }
        let missing = here
            .get_ranges(&Path::from("wal/absent.sst"), &[0..1])
            .await;
        assert!(matches!(missing, Err(object_store::Error::NotFound { .. })));
    }

    /// Reads run on the calling thread on a local disk's file system only.
    #[test]
    fn a_pseudo_file_system_is_not_a_local_disk() {
        assert!(on_local_disk(tempfile::tempdir().unwrap().path()));
        assert!(!on_local_disk(std::path::Path::new("/proc")));
        assert!(!on_local_disk(std::path::Path::new("/no/such/directory")));
    }

    #[test]
    fn lists_what_local_file_system_lists() {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(lists_alike());
    }

    async fn lists_alike() {
        let dir = tempfile::tempdir().unwrap();
        let fs = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let fast = LocalStore::new(dir.path()).unwrap();
        for (name, body) in [
            ("manifest/00000000000000000001.manifest", "a"),
            ("manifest/00000000000000000002.manifest", "bb"),
            ("wal/00000000000000000007.sst", "ccc"),
            ("compacted/01M8V4N2METQ3MEGE3199A4E6B.sst", "dddd"),
            ("moraine/image/00000000000000000151", "e"),
            ("gc/manifest.boundary", "f"),
            ("top", "g"),
        ] {
            fs.put(&Path::from(name), body.into()).await.unwrap();
        }
        // a write under way, as LocalFileSystem stages it, is listed by neither
        std::fs::write(
            dir.path().join("manifest/00000000000000000003.manifest#1"),
            "x",
        )
        .unwrap();
        // a directory the prefix names that does not exist lists nothing
        for (prefix, offset) in [
            (None, None),
            (Some("manifest"), None),
            (Some("moraine"), None),
            (Some("moraine/image"), None),
            (Some("absent"), None),
            (Some("top"), None),
            (
                Some("manifest"),
                Some("manifest/00000000000000000001.manifest"),
            ),
            (None, Some("manifest/00000000000000000001.manifest")),
        ] {
            let want = listed(&fs, prefix, offset).await;
            let got = listed(&fast, prefix, offset).await;
            assert_eq!(got, want, "prefix {prefix:?} offset {offset:?}");
        }
        assert_eq!(listed(&fast, Some("manifest"), None).await.len(), 2);
        // (the listing compared above was the fast one, not the fallback)
        let fast_root = LocalStore::list_fast(&fast.root, None, None).expect("listed fast");
        assert_eq!(fast_root, listed(&fs, None, None).await);
        // a name the fast listing does not map (a space) is listed by LocalFileSystem itself
        std::fs::write(dir.path().join("wal/odd name"), "y").unwrap();
        assert!(LocalStore::list_fast(&fast.root, Some(&Path::from("wal")), None).is_none());
        let want = listed(&fs, Some("wal"), None).await;
        assert_eq!(want.len(), 2);
        assert_eq!(listed(&fast, Some("wal"), None).await, want);
        // as does a directory holding a symbolic link
        std::os::unix::fs::symlink(dir.path().join("top"), dir.path().join("gc/link")).unwrap();
        assert!(LocalStore::list_fast(&fast.root, Some(&Path::from("gc")), None).is_none());
        assert_eq!(
            listed(&fast, Some("gc"), None).await,
            listed(&fs, Some("gc"), None).await
        );
    }
}

/// The bytes of the file at `path`, mapped read-only (private: the file's later changes, which
/// moraine never makes in place, are not promised to show). Unmapped when the last `Bytes`
/// sharing it goes.
fn map_file(path: &std::path::Path) -> std::io::Result<Bytes> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| std::io::Error::other("the file is too large to map"))?;
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: a fresh read-only private mapping of `len` bytes of an open file; the fd may be
    // closed once it is made (the mapping keeps the file)
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Bytes::from_owner(Mapping { ptr, len }))
}

/// A read-only mapping, unmapped when dropped.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until `drop`
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map_file` made, once
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}
