// The C surface between moraine's C++ catalog glue and its Rust core (extension/src/ffi.rs, over moraine-core in src/).
// The C++ side only marshals DuckDB objects into these shapes; every decision is made in Rust.
// The ABI test (extension/src/abi_tests.rs) checks every enum constant, #define and struct here
// against Rust's, with the C++ compiler's view from extension/abi/moraine_abi.cpp: a constant or
// struct added here is listed there and given its Rust counterpart in the test.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct MoraineStore MoraineStore; // one open lake (shared, reference counted)
typedef struct MoraineTxn MoraineTxn;     // one DuckDB transaction's view and staged writes
typedef struct MoraineScan MoraineScan;   // one scan of one table: its pushed-down filters
typedef struct MoraineMat MoraineMat;     // the rows one scan emits in one transaction
typedef struct MoraineRows MoraineRows;   // a row buffer being filled by a sink

// What kind of failure an error is (src/error.rs, Kind).
enum MoraineErrorKind {
	MORAINE_ERROR_NONE = 0,
	MORAINE_ERROR_INVALID_INPUT = 1,   // a URL, an option, a value, a definition moraine does not serve
	MORAINE_ERROR_CONFLICT = 2,        // another transaction committed first (DuckLake retries)
	MORAINE_ERROR_DUPLICATE = 3,       // a stored identity inserted again (DuckLake retries)
	MORAINE_ERROR_CONSTRAINT = 4,      // a rule of the catalog broken
	MORAINE_ERROR_CATALOG = 5,         // a catalog object missing or already there
	MORAINE_ERROR_READ_ONLY = 6,       // a write to a lake attached read-only
	MORAINE_ERROR_IO = 7,              // the store failed or could not be reached; nothing written
	MORAINE_ERROR_OUTCOME_UNKNOWN = 8, // a commit's write may or may not have reached the store
	MORAINE_ERROR_FENCED = 9,          // another writer opened the lake
	MORAINE_ERROR_CORRUPT = 10,        // a stored record does not decode
	MORAINE_ERROR_INTERNAL = 11        // a bug in moraine (a panic); the transaction only rolls back
};

// The DuckDB exception the C++ layer throws for an error: Rust chooses it from the kind
// (extension/src/ffi.rs, Exception::for_kind), never from the message; the C++ layer only throws
// it. None is DuckDB's InternalException or FatalException, which end the database instance.
enum MoraineExceptionType {
	MORAINE_EXCEPTION_NONE = 0,
	MORAINE_EXCEPTION_INVALID_INPUT = 1, // InvalidInputException
	MORAINE_EXCEPTION_TRANSACTION = 2,   // TransactionException
	MORAINE_EXCEPTION_CONSTRAINT = 3,    // ConstraintException
	MORAINE_EXCEPTION_CATALOG = 4,       // CatalogException
	MORAINE_EXCEPTION_PERMISSION = 5,    // PermissionException
	MORAINE_EXCEPTION_IO = 6,            // IOException
	MORAINE_EXCEPTION_CONNECTION = 7     // ConnectionException (a commit of unknown outcome)
};

// An owned error: its message (free with moraine_error_free; `ptr` is NULL when there is no
// error), its MoraineErrorKind and the MoraineExceptionType to throw. Only DuckLake's retryable
// kinds (CONFLICT, DUPLICATE) carry the words DuckLake retries on ("conflict", "primary key",
// "unique", "concurrent").
typedef struct {
	char *ptr;
	size_t len;
	uint32_t kind;
	uint32_t exception;
} MoraineError;

enum MoraineCellTag {
	MORAINE_NULL = 0,
	MORAINE_INT = 1,   // i: any integer that fits i64
	MORAINE_BOOL = 2,  // i: 0 or 1
	MORAINE_FLOAT = 3, // f
	MORAINE_TEXT = 4,  // ptr/len: UTF-8
	MORAINE_BLOB = 5   // ptr/len: a DuckDB Value serialized by the C++ layer
};

// One cell. When produced by Rust, ptr stays valid while the owning MoraineMat lives.
typedef struct {
	uint8_t tag;
	int64_t i;
	double f;
	const uint8_t *ptr;
	size_t len;
} MoraineCell;

typedef struct {
	const char *name;
	size_t name_len;
	const char *type_name; // LogicalType::ToString()
	size_t type_name_len;
	const uint8_t *type_blob; // serialized LogicalType
	size_t type_blob_len;
} MoraineColumnIn;

// Callbacks Rust calls: they must not throw (catch everything, keep it in `ud`, and rethrow
// in the C++ caller once the moraine_* call has returned).
typedef void (*moraine_name_cb)(void *ud, const char *name, size_t len);
typedef void (*moraine_column_cb)(void *ud, const char *name, size_t name_len, const uint8_t *type_blob,
                                  size_t type_blob_len);

void moraine_error_free(MoraineError err);

// Stores. `url` is what followed "moraine:" in ATTACH; `options` are key/value pairs (for an
// s3:// URL the fields of the DuckDB secret that covers it: s3.name, s3.provider, s3.key_id,
// s3.secret, s3.session_token, s3.region, s3.endpoint, s3.url_style, s3.use_ssl). Returns NULL
// and sets *err on failure.
typedef struct {
	const char *key;
	size_t key_len;
	const char *value;
	size_t value_len;
} MoraineOption;
MoraineStore *moraine_store_open(const char *url, size_t url_len, int read_only, const MoraineOption *options,
                                 size_t n_options, MoraineError *err);
void moraine_store_free(MoraineStore *store);

// Describes the store (for GetDBPath / diagnostics): writes its URL via cb.
void moraine_store_url(MoraineStore *store, void *ud, moraine_name_cb cb);

// One row of an operator view made of two texts and an integer.
typedef void (*moraine_text_row_cb)(void *ud, const char *a, size_t a_len, const char *b, size_t b_len,
                                    int64_t value);
// The key census of the committed store: one row per (keyspace, kind) with its key count.
int moraine_store_keyspace(MoraineStore *store, void *ud, moraine_text_row_cb cb, MoraineError *err);

// What an ATTACH opens (src/attach.rs): an s3:// store, opened read-only, or read-write again
// after DuckDB made it read-only by itself (the C++ layer then resets the database's mode).
typedef struct {
	bool s3;
	bool read_only;
	bool read_write_again;
} MoraineAttachPlan;
// Decides what an ATTACH opens from what DuckDB knows of it: its path, the options DuckDB left to
// the storage extension, the names of every option it carried (`named`; values ignored), whether
// DuckDB set it read-only, and whether DuckDB's own access_mode is automatic. Writes *out, then
// calls cb(ud, "url", url, 0) and, when a secret was named, cb(ud, "secret", name, 0). Nonzero
// with *err set when the ATTACH is refused.
int moraine_attach_plan(const char *path, size_t path_len, const MoraineOption *options, size_t n_options,
                        const MoraineOption *named, size_t n_named, bool read_only, bool duckdb_automatic,
                        MoraineAttachPlan *out, void *ud, moraine_text_row_cb cb, MoraineError *err);

// What the store at `url` touches outside the process (a local store's absolute directory, an
// s3:// URL), for DuckDB's enable_external_access / allowed_directories check; `cb` is not
// called for a memory store or a URL that does not parse.
void moraine_url_access_path(const char *url, size_t url_len, void *ud, moraine_name_cb cb);

// One column of an operator view's row, in order: its name and value (kind: MoraineFieldKind;
// `is_null` for NULL).
enum MoraineFieldKind {
	MORAINE_FIELD_TEXT = 0,   // text/text_len
	MORAINE_FIELD_BIGINT = 1, // i
	MORAINE_FIELD_TIME = 2    // i: microseconds since the Unix epoch (UTC)
};
typedef void (*moraine_field_cb)(void *ud, const char *name, size_t name_len, uint32_t kind, int64_t i,
                                 const char *text, size_t text_len, bool is_null);
// moraine_status: the store's head (read now), SlateDB manifest, image and this attach's commits.
int moraine_store_status(MoraineStore *store, void *ud, moraine_field_cb cb, MoraineError *err);
// moraine_reclaim: reclaims the store's space now (only a writer can), then one row of what went.
// explicit: the call runs in an explicit transaction; read_lake: the caller's transaction has a
// transaction of the lake (its DuckLake catalog or its moraine catalog) already; rebound: the
// lake's name was detached and attached again since the bind (it names another store, or none);
// began_micros: when the caller's transaction began (microseconds since the epoch).
int moraine_store_reclaim(MoraineStore *store, bool explicit_transaction, bool read_lake, bool rebound,
                          int64_t began_micros, void *ud, moraine_field_cb cb, MoraineError *err);
// The columns moraine_reclaim returns (the values mean nothing).
void moraine_reclaim_columns(void *ud, moraine_field_cb cb);
// moraine_metrics: SlateDB's metrics for the store, one (name, labels, value) row per call.
int moraine_store_metrics(MoraineStore *store, void *ud, moraine_text_row_cb cb, MoraineError *err);

// moraine's version, as its extension footer carries it: a static string.
const char *moraine_version(void);
// moraine's DuckDB settings (src/settings.rs), each global.
enum MoraineSettingType {
	MORAINE_SETTING_INTERVAL = 0, // an INTERVAL; its store option is whole milliseconds
	MORAINE_SETTING_TEXT = 1      // a VARCHAR; its store option is the text
};
// What a SET of the setting does besides storing it.
enum MoraineOnSet {
	MORAINE_ON_SET_NOTHING = 0,
	MORAINE_ON_SET_CHECK_MAX_COMMIT_SIZE = 1, // moraine_check_max_commit_size
	MORAINE_ON_SET_SET_LOG_LEVEL = 2          // moraine_set_log_level
};
typedef struct {
	const char *name;
	size_t name_len;
	const char *description;
	size_t description_len;
	const char *default_value; // in the setting's own spelling
	size_t default_len;
	uint32_t ty;     // MoraineSettingType
	uint32_t on_set; // MoraineOnSet
	const char *store_option; // the store option an ATTACH reads the value into (length 0: none)
	size_t store_option_len;
} MoraineSetting;
// Calls cb once per setting, in order (the pointers live for the call).
void moraine_settings(void *ud, void (*cb)(void *ud, const MoraineSetting *setting));
// The default of moraine's setting `name`: a static string in the setting's spelling (NULL for
// another name).
const char *moraine_setting_default(const char *name);
// The store option value for an INTERVAL setting of `micros` microseconds written as `shown`:
// whole milliseconds, or `shown` when not positive (the store then refuses it, naming it).
void moraine_interval_option(int64_t micros, const char *shown, size_t shown_len, void *ud, moraine_name_cb cb);
// Checks a moraine_max_commit_size value (0 when it parses; else *err says why).
int moraine_check_max_commit_size(const char *text, size_t len, MoraineError *err);
// Sets moraine_log_level (0 on success; a value that does not parse sets *err and changes
// nothing).
int moraine_set_log_level(const char *spec, size_t len, MoraineError *err);

// Transactions.
// Returns NULL and sets *err on failure.
MoraineTxn *moraine_txn_begin(MoraineStore *store, MoraineError *err);
// Commits and frees the transaction. Returns 0 on success, else sets *err (nothing was written).
int moraine_txn_commit(MoraineTxn *txn, MoraineError *err);
void moraine_txn_rollback(MoraineTxn *txn);

int moraine_txn_schemas(MoraineTxn *txn, void *ud, moraine_name_cb cb, MoraineError *err);
int moraine_txn_create_schema(MoraineTxn *txn, const char *name, size_t len, int if_not_exists, MoraineError *err);
int moraine_txn_drop_schema(MoraineTxn *txn, const char *name, size_t len, int if_exists, MoraineError *err);
// For each table in the schema: table_cb(name), then column_cb once per column.
int moraine_txn_tables(MoraineTxn *txn, const char *schema, size_t schema_len, void *ud, moraine_name_cb table_cb,
                       moraine_column_cb column_cb, MoraineError *err);
// One table by exact name: 1 (and its columns through the callbacks), 0 if absent, -1 on error.
int moraine_txn_table(MoraineTxn *txn, const char *schema, size_t schema_len, const char *name, size_t name_len,
                      void *ud, moraine_name_cb table_cb, moraine_column_cb column_cb, MoraineError *err);
int moraine_txn_create_table(MoraineTxn *txn, const char *schema, size_t schema_len, const char *name, size_t name_len,
                             const MoraineColumnIn *columns, size_t ncolumns, MoraineError *err);
int moraine_txn_drop_table(MoraineTxn *txn, const char *schema, size_t schema_len, const char *name, size_t name_len,
                           MoraineError *err);

// The id of the committed schemas and tables this transaction sees: 1 and sets *out when they are
// the committed ones (entries built for the same id may be shared; an id is never reused for
// other definitions), 0 once the transaction has staged DDL (its definitions are its own), or -1
// and sets *err.
int moraine_txn_definitions(MoraineTxn *txn, uint64_t *out, MoraineError *err);

// A scan of one table in one transaction (src/scan.rs): DuckDB's pushed-down filters go in as
// neutral predicates, and Rust decides which it applies, whether history is read and which rows
// the scan emits (kept until the transaction or the filters change).
MoraineScan *moraine_scan_new(const char *schema, size_t schema_len, const char *name, size_t name_len);
void moraine_scan_free(MoraineScan *scan);

// How a predicate compares its column with its value.
enum MoraineOp {
	MORAINE_OP_EQ = 0,
	MORAINE_OP_LT = 1,
	MORAINE_OP_LE = 2,
	MORAINE_OP_GT = 3,
	MORAINE_OP_GE = 4,
	MORAINE_OP_IS_NULL = 5 // the value is ignored
};

// `column op value`, the column on the left. Filter `filter` of the pushdown is the AND of its
// clauses, a clause the OR of its predicates: `c IN (1, 2)` is one clause of two EQ,
// `c BETWEEN 1 AND 5` two clauses. A filter the C++ layer cannot describe whole is not passed.
typedef struct {
	size_t filter;
	size_t clause;
	size_t column; // the column's index in the table
	uint32_t op;   // MoraineOp
	MoraineCell value;
} MorainePredicate;

// DuckDB's filter pushdown: sets applied[f] to 1 for each of the n_filters filters the scan
// applies exactly (DuckDB drops it), else 0. Returns 1 when the scan emits no row (DuckDB is then
// handed a constant FALSE filter), else 0.
int moraine_scan_push(const MoraineScan *scan, MoraineTxn *txn, const MorainePredicate *predicates, size_t n,
                      size_t n_filters, uint8_t *applied);
// The rows the scan emits in this transaction. Row ids are moraine_mat_rowid(mat, index). Returns
// NULL and sets *err on failure.
MoraineMat *moraine_scan_rows(const MoraineScan *scan, MoraineTxn *txn, MoraineError *err);
size_t moraine_mat_len(const MoraineMat *mat);
int64_t moraine_mat_rowid(const MoraineMat *mat, size_t index);
void moraine_mat_cell(const MoraineMat *mat, size_t row, size_t col, MoraineCell *out);
// Rows start..start+count of column col into values (width 8: int64_t, 4: int32_t; valid[i] = 0
// for NULL), and into nulls how many are NULL (values then matter only where valid; they may be
// left unwritten when all are NULL). blob_type is 0 for integer cells, else the DuckDB type id of
// a type held as a 32- or 64-bit integer whose values are stored serialized (DATE, TIMESTAMP...).
// False when a cell there is of another kind or does not fit (then read cell by cell).
bool moraine_mat_ints(const MoraineMat *mat, size_t start, size_t count, size_t col, uint8_t blob_type,
                      uint8_t width, void *values, uint8_t *valid, size_t *nulls);
// The bounds of an integer column over the rows the scan emits (min and max only when
// has_value); false when a cell there is not an integer or NULL.
typedef struct {
	int64_t min;
	int64_t max;
	bool has_value;
	bool has_null;
} MoraineIntStats;
bool moraine_mat_int_stats(const MoraineMat *mat, size_t col, MoraineIntStats *out);
// A cell of `mat` (row `index`, column `col`) the scan cannot write into its column's vector (a
// cell of another kind, an integer out of the type's range, a serialized value that does not
// deserialize or convert): sets *err to the corrupt-record error naming the table, the column
// (`column`, of DuckDB type `column_type`), the row and what is stored; `why` (may be empty)
// says what failed.
void moraine_mat_misfit(const MoraineMat *mat, size_t index, size_t col, const char *column, size_t column_len,
                        const char *column_type, size_t column_type_len, const char *why, size_t why_len,
                        MoraineError *err);
// What EXPLAIN ANALYZE shows of the scan: cb(name, value) per line (the integer is 0).
void moraine_mat_explain(const MoraineMat *mat, void *ud, moraine_text_row_cb cb);
void moraine_mat_free(MoraineMat *mat);

// Row buffers filled by sinks: push ncols cells per row.
MoraineRows *moraine_rows_new(size_t ncols);
void moraine_rows_push(MoraineRows *rows, const MoraineCell *cell);
size_t moraine_rows_len(const MoraineRows *rows);
void moraine_rows_free(MoraineRows *rows);

// Staging. Each consumes `rows`. Returns 0 on success, else sets *err.
int moraine_txn_stage_insert(MoraineTxn *txn, const char *schema, size_t schema_len, const char *name, size_t name_len,
                             MoraineRows *rows, MoraineError *err);
// rows holds, for each rowid, the new values of the columns listed in `cols` (in that order).
int moraine_txn_stage_update(MoraineTxn *txn, const char *schema, size_t schema_len, const char *name, size_t name_len,
                             const int64_t *rowids, size_t nrowids, const size_t *cols, size_t ncols,
                             MoraineRows *rows, MoraineError *err);
int moraine_txn_stage_delete(MoraineTxn *txn, const char *schema, size_t schema_len, const char *name, size_t name_len,
                             const int64_t *rowids, size_t nrowids, MoraineError *err);

#ifdef __cplusplus
}
#endif
