"""A moraine lake on S3 (issue 10): `ducklake:moraine:s3://bucket/prefix` against the pinned
moto_server on 127.0.0.1, through stock DuckDB 1.5.5, DuckLake and httpfs from PyPI.

- A writer creates, inserts (inlined and Parquet), updates, deletes, flushes inlined data,
  merges files, expires snapshots and cleans up: DuckLake's data files come and go in the
  bucket, moraine's objects live under the prefix, nothing is written to the local disk.
- A fresh process re-attaches and reads the same rows, and time travel works there; a READ_ONLY
  process reads beside the attached writer.
- The writer attaches as a user writes it, with no access mode (DuckDB would make an s3:// path
  read-only by itself; moraine opens it read-write, as it does a local store); a fresh process
  names READ_WRITE, a reader READ_ONLY.
- Errors: no secret covers the URL; SECRET names no secret; a missing bucket. Each names what
  was wrong and leaves the bucket as it was, and the same ATTACH works once the cause is gone.
"""
# needs: moto_server
import os

from _harness import TEST_DIR, check, expect_error, finish
from _s3 import Moto, fresh_process, s3_connect

BUCKET = "moraine-lake"
META = f"s3://{BUCKET}/lake-meta"
DATA = f"s3://{BUCKET}/lake-data/"


def attach_sql(mode=None, meta=META, extra=""):
    mode_sql = f"{mode}, " if mode else ""
    return f"ATTACH 'ducklake:moraine:{meta}' AS lake ({mode_sql}DATA_PATH '{DATA}'{extra})"


def rows(db, sql):
    return [tuple(r) for r in db.execute(sql).fetchall()]


def in_fresh_process(moto, mode, queries):
    """Runs `queries` in a new python3 process attached with `mode`; returns their rows."""
    rows, err = fresh_process([moto.secret_sql(), attach_sql(mode)], queries, timeout=120)
    if err is not None:
        raise RuntimeError(err)
    return rows


def local_files():
    """Files under the test directory, less the S3 server's own."""
    found = []
    for root, _, files in os.walk(TEST_DIR):
        if os.path.relpath(root, TEST_DIR).split(os.sep)[0] == "moto":
            continue
        found += [os.path.join(root, f) for f in files]
    return found


def main():
    moto = Moto(os.path.join(TEST_DIR, "moto"))
    try:
        scenario(moto)
    finally:
        moto.stop()


def scenario(moto):
    moto.create_bucket(BUCKET)
    os.chdir(TEST_DIR)

    # ---- errors first: each leaves the bucket empty ------------------------------------------
    bare = s3_connect(moto, secret=False)
    expect_error("no secret covers the URL", lambda: bare.execute(attach_sql()),
                 "no duckdb secret of type s3 covers")
    expect_error("SECRET names no secret",
                 lambda: bare.execute(attach_sql(extra=", META_SECRET 'nope'")),
                 'no secret named "nope"')
    bare.execute("CREATE SECRET web (TYPE http, BEARER_TOKEN 'not-for-s3')")
    expect_error("SECRET names a secret of another type",
                 lambda: bare.execute(attach_sql(extra=", META_SECRET 'web'")),
                 'secret "web" is of type http')
    bare.close()
    db = s3_connect(moto)
    expect_error("a missing bucket", lambda: db.execute(
        attach_sql(meta="s3://no-such-bucket/lake-meta")),
        "cannot reach s3://no-such-bucket/lake-meta")
    check("the failed attaches wrote nothing", moto.keys(BUCKET) == [], moto.keys(BUCKET))

    # ---- a writer -----------------------------------------------------------------------------
    db.execute(attach_sql())
    modes = rows(db, "SELECT (SELECT readonly FROM duckdb_databases() WHERE database_name = 'lake'), "
                     "mode FROM moraine_status('lake')")
    check("an ATTACH naming no access mode opens the lake and its store read-write",
          modes == [(False, "writer")], modes)
    for again in ("ATTACH OR REPLACE", "ATTACH IF NOT EXISTS"):
        db.execute(attach_sql().replace("ATTACH", again, 1))
        check(f"{again} of the attached lake keeps it writable",
              rows(db, "SELECT mode FROM moraine_status('lake')") == [("writer",)])
    db.execute("CREATE TABLE lake.t (i INTEGER, s VARCHAR)")
    db.execute("INSERT INTO lake.t VALUES (1, 'one'), (2, 'two')")          # inlined
    db.execute("INSERT INTO lake.t SELECT i, 'bulk' FROM range(100, 1100) r(i)")  # Parquet
    bulk_snapshot = rows(db, "SELECT max(snapshot_id) FROM lake.snapshots()")[0][0]
    db.execute("UPDATE lake.t SET s = 'uno' WHERE i = 1")
    db.execute("DELETE FROM lake.t WHERE i >= 1000")
    want = [(902, 1, 999)]
    check("the writer reads its commits", rows(db, "SELECT count(*), min(i), max(i) FROM lake.t") == want,
          rows(db, "SELECT count(*), min(i), max(i) FROM lake.t"))
    db.execute("CALL ducklake_flush_inlined_data('lake')")
    db.execute("INSERT INTO lake.t SELECT i, 'more' FROM range(2000, 2300) r(i)")
    db.execute("CALL ducklake_merge_adjacent_files('lake')")
    # a dropped table's files become garbage once the snapshots that see them expire
    db.execute("CREATE TABLE lake.gone AS SELECT i FROM range(1000) r(i)")
    db.execute("DROP TABLE lake.gone")
    want = [(1202, 1, 2299)]
    got = rows(db, "SELECT count(*), min(i), max(i) FROM lake.t")
    check("flush and merge keep every row", got == want, got)
    check("s for i = 1 is updated", rows(db, "SELECT s FROM lake.t WHERE i = 1") == [("uno",)])

    meta_keys = moto.keys(BUCKET, "lake-meta/")
    check("moraine's objects are under the prefix",
          any("/manifest/" in k for k in meta_keys) and any("/wal/" in k for k in meta_keys),
          meta_keys[:10])
    data_keys = [k for k in moto.keys(BUCKET, "lake-data/") if k.endswith(".parquet")]
    check("DuckLake's data files are in the bucket", len(data_keys) >= 2, data_keys)
    stray = [k for k in moto.keys(BUCKET) if not k.startswith(("lake-meta/", "lake-data/"))]
    check("nothing outside the two prefixes", stray == [], stray)
    check("nothing written to the local disk", local_files() == [], local_files())

    # ---- a second DuckDB in this process shares the open store only with the same secret -----
    other = s3_connect(moto, secret=False)
    other.execute(moto.secret_sql(name="other").replace("KEY_ID 'moraine-test'", "KEY_ID 'other-key'"))
    expect_error("a second attach in the process with another secret is refused",
                 lambda: other.execute(attach_sql()), "already attached in this process")
    other.close()

    # ---- other processes: a READ_ONLY reader beside the writer, then a fresh writer ----------
    [[reader_count], reader_mode] = in_fresh_process(
        moto, "READ_ONLY", ["SELECT count(*) FROM lake.t", "SELECT mode FROM moraine_status('lake')"])
    check("a READ_ONLY process reads the writer's commits", reader_count == (1202,), reader_count)
    check("a READ_ONLY process opens the store as a reader", reader_mode == [("reader",)], reader_mode)
    db.execute("DETACH lake")
    got = in_fresh_process(moto, "READ_WRITE", [
        "SELECT count(*), min(i), max(i) FROM lake.t",
        f"SELECT count(*), count(*) FILTER (s = 'uno') FROM lake.t AT (VERSION => {bulk_snapshot})",
        "INSERT INTO lake.t VALUES (5000, 'late')",
        "SELECT i FROM lake.t WHERE s = 'late'",
    ])
    check("a fresh process re-attaches and reads the same rows", got[0] == [(1202, 1, 2299)], got[0])
    check("time travel in a fresh process", got[1] == [(1002, 0)], got[1])
    check("a fresh process commits", got[3] == [(5000,)], got[3])

    # ---- expiry and cleanup delete data files from the bucket ----------------------------------
    db.execute(attach_sql())
    check("the fresh process's commit is seen", rows(db, "SELECT count(*) FROM lake.t") == [(1203,)])
    before = set(k for k in moto.keys(BUCKET, "lake-data/") if k.endswith(".parquet"))
    expired = rows(db, "SELECT count(*) FROM ducklake_expire_snapshots('lake', "
                       "older_than => now() + INTERVAL 1 DAY)")
    scheduled = rows(db, "SELECT count(*) FROM "
                         "__ducklake_metadata_lake.ducklake_files_scheduled_for_deletion")
    deleted = rows(db, "SELECT path FROM ducklake_cleanup_old_files('lake', cleanup_all => true)")
    after = set(k for k in moto.keys(BUCKET, "lake-data/") if k.endswith(".parquet"))
    check("cleanup deleted the scheduled data files from the bucket",
          deleted and len(deleted) == scheduled[0][0] and after == before - {
              p[len(f"s3://{BUCKET}/"):] for (p,) in deleted},
          (expired, scheduled, deleted, sorted(before), sorted(after)))
    got = rows(db, "SELECT count(*), min(i), max(i) FROM lake.t")
    check("the rows survive expiry and cleanup", got == [(1203, 1, 5000)], got)
    check("one snapshot is left", rows(db, "SELECT count(*) FROM lake.snapshots()") == [(1,)],
          rows(db, "SELECT count(*) FROM lake.snapshots()"))
    db.execute("DETACH lake")
    # with META_TYPE DuckDB keeps the moraine: prefix on the path and does not make it read-only
    db.execute(f"ATTACH 'ducklake:moraine:{META}' AS lake (DATA_PATH '{DATA}', META_TYPE 'moraine')")
    db.execute("INSERT INTO lake.t VALUES (6000, 'typed')")
    check("META_TYPE 'moraine' attaches read-write without an access mode",
          rows(db, "SELECT count(*) FROM lake.t") == [(1204,)])
    db.execute("DELETE FROM lake.t WHERE i = 6000")
    db.execute("DETACH lake")
    before = len(moto.requests())
    got = in_fresh_process(moto, "READ_ONLY", ["SELECT count(*) FROM lake.t"])
    check("a fresh process reads the lake after cleanup", got == [[(1203,)]], got)
    # (the writer's DETACH wrote a checkpoint of the head: the attach starts from it, RFC 0009)
    catalog = [r for r in moto.requests()[before:] if "lake-meta" in r[1]]
    check("... its READ_ONLY attach and query read the newest checkpoint and list the commits "
          "after it, and open no SlateDB",
          len(catalog) <= 6 and any("/moraine/image/" in r[1] for r in catalog)
          and not any(k in r[1] for r in catalog for k in ("manifest", "/wal/", "/compacted/")),
          catalog)
    check("still nothing on the local disk", local_files() == [], local_files())

    # ---- ATTACH OR REPLACE of another s3:// lake under an attached lake's name ------------------
    # DuckDB checks DuckLake's inner ATTACH OR REPLACE (made read-only, naming no mode) against
    # the attached read-write metadata catalog before moraine is asked, and refuses it. (With
    # READ_WRITE it would go through, into a DuckLake 1.5.5 bug on every catalog: detaching the
    # replaced lake detaches the new lake's metadata catalog, which has the same name.)
    def other_lake(name, mode=None, how="ATTACH"):
        return attach_sql(mode, meta=f"s3://{BUCKET}/{name}").replace("ATTACH", how, 1)
    db.execute(other_lake("first-meta"))
    db.execute("CREATE TABLE lake.first AS SELECT 1 AS i")
    expect_error("ATTACH OR REPLACE of another s3:// lake naming no mode",
                 lambda: db.execute(other_lake("second-meta", how="ATTACH OR REPLACE")),
                 "cannot re-attach in read_only mode")
    check("the attached lake stays, writable",
          rows(db, "SELECT url, mode FROM moraine_status('lake')") ==
          [(f"s3://{BUCKET}/first-meta", "writer")] and
          rows(db, "SELECT i FROM lake.first") == [(1,)])
    check("the refused replace wrote nothing", moto.keys(BUCKET, "second-meta/") == [])
    db.execute("DETACH lake")
    db.execute(other_lake("second-meta"))
    db.execute("CREATE TABLE lake.second AS SELECT 2 AS i")
    check("after a DETACH the other lake attaches under the name",
          rows(db, "SELECT url, mode FROM moraine_status('lake')") ==
          [(f"s3://{BUCKET}/second-meta", "writer")] and
          rows(db, "SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake'") ==
          [("second",)])
    db.execute("DETACH lake")
    db.close()


if __name__ == "__main__":
    main()
    finish("s3_store")
