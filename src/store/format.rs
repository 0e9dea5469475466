//! The store's format marker (`sys/format`): the format this build writes, and the earlier ones
//! it reads and a writer upgrades at open.

use super::*;

/// Value of `sys/format`: the moraine store format this build writes and reads.
pub const STORE_FORMAT: &str = "moraine-store-4";

/// The format before compression (RFC 0013): this layout, every object uncompressed. Read as it
/// is and upgraded by a writer. (A build of that format cannot open a store-4 store at all:
/// SlateDB's compressed WAL fails it before it reads the marker.)
const FORMAT_UNCOMPRESSED: &str = "moraine-store-3";

/// The format before the image's own records (`image/`: checkpoint pointer and commit log,
/// RFC 0009): the same layout without them, read as it is and upgraded by a writer. A build
/// of that format would refuse `image/` keys as outside its keyspace, hence the new marker.
const FORMAT_WITHOUT_IMAGE: &str = "moraine-store-2";

/// The format before lakes were keyed apart (RFC 0002): read, and upgraded by a writer, when
/// all its lakes are in schema `main`, where the two layouts coincide.
const PREVIOUS_FORMAT: &str = "moraine-store-1";

/// Accept the store's `sys/format`: this build's, or the previous one when its layout is this
/// one's (every lake in schema `main`); a writer then upgrades the marker.
pub(super) async fn check_format(location: &str, backend: &Backend, value: &[u8]) -> Result<()> {
    if value == STORE_FORMAT.as_bytes() {
        return Ok(());
    }
    if ![PREVIOUS_FORMAT, FORMAT_WITHOUT_IMAGE, FORMAT_UNCOMPRESSED]
        .iter()
        .any(|f| value == f.as_bytes())
    {
        return Err(not_a_store(
            location,
            format!(
                "its sys/format is {:?}; this build reads {STORE_FORMAT:?} (and \
                 {FORMAT_UNCOMPRESSED:?}, {FORMAT_WITHOUT_IMAGE:?}, {PREVIOUS_FORMAT:?})",
                String::from_utf8_lossy(value)
            ),
        ));
    }
    let keyed_apart = value != PREVIOUS_FORMAT.as_bytes();
    for (key, _) in backend.scan(&keys::sys_table_prefix()).await? {
        if keyed_apart {
            break;
        }
        if let [_, _, Cell::Text(schema), Cell::Text(name)] = keys::decode_key(&key)?.as_slice() {
            if schema != keys::DEFAULT_LAKE && crate::tables::fixed_table(name).is_some() {
                return Err(not_a_store(
                    location,
                    format!(
                        "its sys/format is {PREVIOUS_FORMAT:?} and it holds a lake in schema \
                         {schema}, whose rows that format kept at the keys of schema main's; \
                         this build ({STORE_FORMAT:?}) keys lakes apart and cannot read it"
                    ),
                ));
            }
        }
    }
    if let Backend::Writer(db, _) = backend {
        let handle = db.put(keys::sys_format(), STORE_FORMAT.as_bytes()).await?;
        db.flush().await?;
        handle.await_durable().await?;
    }
    Ok(())
}
