//! What the core's own tests share beyond the public helpers: committing tables, and reading a
//! store back through a new transaction or past the image, in its raw keyspace.

use super::*;
use crate::keys;
use crate::runtime::block_on;
use crate::txn::Transaction;

/// Commit snapshot `id` creating table `table_id`.
pub(crate) fn commit_table(store: &Arc<Store>, id: i64, table_id: i64, name: &str) {
    commit_table_result(store, id, table_id, name).unwrap()
}

/// [`commit_table`], returning what the commit returned.
pub(crate) fn commit_table_result(
    store: &Arc<Store>,
    id: i64,
    table_id: i64,
    name: &str,
) -> crate::error::Result<()> {
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(id)])?;
    t.stage_insert(
        M,
        "ducklake_snapshot_changes",
        vec![changes(id, "created_table")],
    )?;
    t.stage_insert(
        M,
        "ducklake_table",
        vec![table_row(table_id, id, None, name)],
    )?;
    t.commit()
}

/// Stage in `t` the end, as of snapshot `end`, of the version of table `id` (`name`, begun at
/// `begin`), which `t` reads as its live table at `at`.
pub(crate) fn stage_table_end(
    t: &mut Transaction,
    at: usize,
    (id, begin, name): (i64, i64, &str),
    end: i64,
) {
    let m = t.rows(M, "ducklake_table", false).unwrap();
    assert_eq!(m.rows[at], table_row(id, begin, None, name));
    t.stage_update(
        M,
        "ducklake_table",
        vec![(
            crate::txn::rowid(m.id, at),
            table_row(id, begin, Some(end), name),
        )],
    )
    .unwrap();
}

/// Commit [`stage_table_end`] alone: a hand edit, in no snapshot of its own.
pub(crate) fn end_table(store: &Arc<Store>, at: usize, table: (i64, i64, &str), end: i64) {
    let mut t = store.begin();
    stage_table_end(&mut t, at, table, end);
    t.commit().unwrap();
}

/// What the store itself holds under `prefix` (history included), read past the image.
pub(crate) fn raw(store: &Arc<Store>, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    block_on(store.backend().scan(prefix))
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

pub(crate) fn rows_of(store: &Arc<Store>, table: &str, history: bool) -> Vec<Row> {
    store.begin().rows(M, table, history).unwrap().rows.to_vec()
}

/// One column of the rows a new transaction reads from `table`.
pub(crate) fn column_of(store: &Arc<Store>, table: &str, history: bool, name: &str) -> Vec<Cell> {
    col(&rows_of(store, table, history), table, name)
}

/// Every catalog record of the store: all of it but the image's own records (`image/`: the
/// commit log and the checkpoint pointer, which a background checkpoint may write at any time).
pub(crate) fn everything(store: &Arc<Store>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let image = keys::image_prefix();
    raw(store, &[])
        .into_iter()
        .filter(|(k, _)| !k.starts_with(&image))
        .collect()
}

/// The first cell of every row `t` reads from `table` (with history).
pub(crate) fn first_cells(t: &mut Transaction, table: &str) -> Vec<Cell> {
    let m = t.rows(M, table, true).unwrap();
    m.rows.iter().map(|r| r[0].clone()).collect()
}

/// The names of the live tables a new transaction reads.
pub(crate) fn table_names(store: &Arc<Store>) -> Vec<Cell> {
    column_of(store, "ducklake_table", false, "table_name")
}

/// A read-write attach of `url` that took the folder role at once, as its first commit would:
/// an attach opens SlateDB's writer only then (RFC 0009).
pub(crate) fn open_folder(url: &str) -> Arc<Store> {
    let store = Store::open(url, false).unwrap();
    store.take_folder_role().unwrap();
    assert!(store.is_folder());
    store
}

/// The checkpointer's work up to the object of a checkpoint of `folder`'s head in `mem`, and
/// not the pointer (`image/checkpoint`), as a folder that died between the two leaves it; the
/// object's batch.
pub(crate) fn write_checkpoint_object_only(
    folder: &Arc<Store>,
    mem: &Arc<object_store::memory::InMemory>,
) -> u64 {
    use crate::checkpoint;
    let image = folder.current_image().unwrap();
    block_on(folder.db().unwrap().flush()).unwrap();
    let held = block_on(image.held_ranges()).unwrap();
    let object = checkpoint::encode_checkpoint(
        image.head(),
        crate::store::STORE_FORMAT,
        held.as_ref(),
        image.checkpoint_sections(),
        crate::compression::DEFAULT,
    );
    let batch = image.head().batch_count;
    let path = object_store::path::Path::from(checkpoint::object_path(batch));
    block_on(async {
        use object_store::ObjectStoreExt;
        mem.put(&path, object.into()).await.unwrap()
    });
    batch
}
