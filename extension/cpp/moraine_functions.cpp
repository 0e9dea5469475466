// moraine's own SQL functions: operator views of a lake's store. Each bind asks Rust for its
// rows; the scan hands them out.
#include "moraine_functions.hpp"

#include "moraine_catalog.hpp"
#include "moraine_error.hpp"

#include "duckdb/main/extension/extension_loader.hpp"
#include "duckdb/main/database_manager.hpp"
#include "duckdb/transaction/meta_transaction.hpp"

namespace duckdb {

//! The rows one operator view returns, collected at bind.
struct MoraineRowsBindData : public TableFunctionData, MoraineCallbackState {
	vector<string> names;
	vector<LogicalType> types;
	vector<vector<Value>> rows;
};

//! The moraine catalog `name` names: a moraine catalog itself, or a DuckLake lake whose metadata
//! catalog (DuckLake's default name for it, `__ducklake_metadata_<lake>`) is one.
static MoraineCatalog &MoraineLake(ClientContext &context, const string &function, const string &name,
                                   optional_ptr<Catalog> *named = nullptr) {
	auto &catalog = Catalog::GetCatalog(context, name);
	if (named) {
		*named = &catalog;
	}
	if (catalog.GetCatalogType() == "moraine") {
		return catalog.Cast<MoraineCatalog>();
	}
	if (catalog.GetCatalogType() == "ducklake") {
		auto metadata = Catalog::GetCatalogEntry(context, "__ducklake_metadata_" + name);
		if (metadata && metadata->GetCatalogType() == "moraine") {
			return metadata->Cast<MoraineCatalog>();
		}
	}
	throw InvalidInputException("%s: \"%s\" is a %s catalog whose metadata is not in moraine (pass a DuckLake "
	                            "lake attached with 'ducklake:moraine:...', or its metadata catalog)",
	                            function, name, catalog.GetCatalogType());
}

//! Fetches the rows of the view `function` for the lake its first argument names: `fetch` calls
//! `cb` once per row or field (the store stays open through the call, even if the lake is
//! detached meanwhile).
template <class CB>
static unique_ptr<MoraineRowsBindData> FetchRows(ClientContext &context, TableFunctionBindInput &input,
                                                 const char *function,
                                                 int (*fetch)(MoraineStore *, void *, CB, MoraineError *), CB cb) {
	auto store = MoraineLake(context, function, input.inputs[0].GetValue<string>()).store;
	auto result = make_uniq<MoraineRowsBindData>();
	MoraineError err {};
	if (fetch(store->store, result.get(), cb, &err) != 0) {
		MoraineThrow(err);
	}
	MoraineRethrow(*result);
	return result;
}

static void OnTextRow(void *ud, const char *a, size_t a_len, const char *b, size_t b_len, int64_t value) {
	auto &data = *static_cast<MoraineRowsBindData *>(ud);
	MoraineCallback(data, [&]() {
		data.rows.push_back({Value(string(a, a_len)), Value(string(b, b_len)), Value::BIGINT(value)});
	});
}

//! The bind of a view of (VARCHAR, VARCHAR, BIGINT) rows named `columns`.
static unique_ptr<FunctionData> TextRowsBind(ClientContext &context, TableFunctionBindInput &input,
                                             const char *function,
                                             int (*fetch)(MoraineStore *, void *, moraine_text_row_cb, MoraineError *),
                                             vector<string> columns, vector<LogicalType> &return_types,
                                             vector<string> &names) {
	auto result = FetchRows<moraine_text_row_cb>(context, input, function, fetch, OnTextRow);
	names = std::move(columns);
	return_types = {LogicalType::VARCHAR, LogicalType::VARCHAR, LogicalType::BIGINT};
	return std::move(result);
}

//! moraine_keyspace(lake): keys per keyspace and kind in the committed store.
static unique_ptr<FunctionData> KeyspaceBind(ClientContext &context, TableFunctionBindInput &input,
                                             vector<LogicalType> &return_types, vector<string> &names) {
	return TextRowsBind(context, input, "moraine_keyspace", moraine_store_keyspace, {"keyspace", "kind", "keys"},
	                    return_types, names);
}

//! moraine_metrics(lake): SlateDB's metrics for the store behind the lake.
static unique_ptr<FunctionData> MetricsBind(ClientContext &context, TableFunctionBindInput &input,
                                            vector<LogicalType> &return_types, vector<string> &names) {
	return TextRowsBind(context, input, "moraine_metrics", moraine_store_metrics, {"name", "labels", "value"},
	                    return_types, names);
}

static void OnStatusField(void *ud, const char *name, size_t name_len, uint32_t kind, int64_t i, const char *text,
                          size_t text_len, bool is_null) {
	auto &data = *static_cast<MoraineRowsBindData *>(ud);
	MoraineCallback(data, [&]() {
		if (data.rows.empty()) {
			data.rows.emplace_back();
		}
		LogicalType type;
		Value value;
		switch (kind) {
		case MORAINE_FIELD_TEXT:
			type = LogicalType::VARCHAR;
			value = Value(string(text, text_len));
			break;
		case MORAINE_FIELD_BIGINT:
			type = LogicalType::BIGINT;
			value = Value::BIGINT(i);
			break;
		case MORAINE_FIELD_TIME:
			type = LogicalType::TIMESTAMP_TZ;
			value = Value::TIMESTAMPTZ(timestamp_tz_t(i));
			break;
		default:
			throw InternalException("moraine_status: unknown field kind %d", kind);
		}
		data.names.emplace_back(name, name_len);
		data.types.push_back(type);
		data.rows[0].push_back(is_null ? Value(type) : value);
	});
}

//! moraine_status(lake): one row describing the store behind the lake.
static unique_ptr<FunctionData> StatusBind(ClientContext &context, TableFunctionBindInput &input,
                                           vector<LogicalType> &return_types, vector<string> &names) {
	auto result = FetchRows<moraine_field_cb>(context, input, "moraine_status", moraine_store_status, OnStatusField);
	names = result->names;
	return_types = result->types;
	return std::move(result);
}

//! moraine_reclaim(lake): the bind knows the lake and the columns; the scan reclaims.
struct MoraineReclaimBindData : public MoraineRowsBindData {
	shared_ptr<MoraineStoreRef> store;
	//! The databases of the lake, by name (looked up at the scan, which may run after a DETACH
	//! and ATTACH of a prepared statement): the one the argument names, and its moraine catalog.
	string named_db;
	string moraine_db;
};

static unique_ptr<FunctionData> ReclaimBind(ClientContext &context, TableFunctionBindInput &input,
                                            vector<LogicalType> &return_types, vector<string> &names) {
	auto result = make_uniq<MoraineReclaimBindData>();
	optional_ptr<Catalog> named;
	auto &lake = MoraineLake(context, "moraine_reclaim", input.inputs[0].GetValue<string>(), &named);
	result->store = lake.store;
	result->named_db = named->GetAttached().GetName();
	result->moraine_db = lake.GetAttached().GetName();
	moraine_reclaim_columns(result.get(), OnStatusField);
	MoraineRethrow(*result);
	names = result->names;
	return_types = result->types;
	return std::move(result);
}

struct MoraineRowsState : public GlobalTableFunctionState {
	idx_t position = 0;
};

static void ReclaimScan(ClientContext &context, TableFunctionInput &input, DataChunk &output) {
	auto &state = input.global_state->Cast<MoraineRowsState>();
	if (state.position > 0) {
		output.SetCardinality(0);
		return;
	}
	state.position = 1;
	auto &bind = input.bind_data->Cast<MoraineReclaimBindData>();
	MoraineRowsBindData done;
	MoraineError err {};
	// the facts Rust decides on (src/store/reclaim.rs, Caller)
	auto &meta = MetaTransaction::Get(context);
	auto &databases = DatabaseManager::Get(context);
	bool read_lake = false;
	for (auto &name : {bind.named_db, bind.moraine_db}) {
		auto db = databases.GetDatabase(context, name);
		read_lake = read_lake || (db && meta.TryGetTransaction(*db));
	}
	auto moraine_db = databases.GetDatabase(context, bind.moraine_db);
	bool rebound = !moraine_db || moraine_db->GetCatalog().GetCatalogType() != "moraine" ||
	               moraine_db->GetCatalog().Cast<MoraineCatalog>().store != bind.store;
	bool explicit_transaction = !context.transaction.IsAutoCommit();
	int64_t began = meta.GetCurrentTransactionStartTimestamp().value;
	if (moraine_store_reclaim(bind.store->store, explicit_transaction, read_lake, rebound, began, &done, OnStatusField,
	                          &err) != 0) {
		MoraineThrow(err);
	}
	MoraineRethrow(done);
	for (idx_t c = 0; c < done.rows[0].size(); c++) {
		output.SetValue(c, 0, done.rows[0][c]);
	}
	output.SetCardinality(1);
}

static unique_ptr<GlobalTableFunctionState> RowsInit(ClientContext &context, TableFunctionInitInput &input) {
	return make_uniq<MoraineRowsState>();
}

static void RowsScan(ClientContext &context, TableFunctionInput &input, DataChunk &output) {
	auto &rows = input.bind_data->Cast<MoraineRowsBindData>().rows;
	auto &state = input.global_state->Cast<MoraineRowsState>();
	idx_t count = 0;
	while (state.position < rows.size() && count < STANDARD_VECTOR_SIZE) {
		auto &row = rows[state.position++];
		for (idx_t c = 0; c < row.size(); c++) {
			output.SetValue(c, count, row[c]);
		}
		count++;
	}
	output.SetCardinality(count);
}

//! moraine_version(): the version of the loaded moraine.
static void VersionFunction(DataChunk &args, ExpressionState &state, Vector &result) {
	result.SetVectorType(VectorType::CONSTANT_VECTOR);
	ConstantVector::GetData<string_t>(result)[0] = StringVector::AddString(result, moraine_version());
}

void MoraineRegisterFunctions(ExtensionLoader &loader) {
	loader.RegisterFunction(ScalarFunction("moraine_version", {}, LogicalType::VARCHAR, VersionFunction));
	loader.RegisterFunction(TableFunction("moraine_keyspace", {LogicalType::VARCHAR}, RowsScan, KeyspaceBind, RowsInit));
	loader.RegisterFunction(TableFunction("moraine_status", {LogicalType::VARCHAR}, RowsScan, StatusBind, RowsInit));
	loader.RegisterFunction(TableFunction("moraine_metrics", {LogicalType::VARCHAR}, RowsScan, MetricsBind, RowsInit));
	loader.RegisterFunction(TableFunction("moraine_reclaim", {LogicalType::VARCHAR}, ReclaimScan, ReclaimBind, RowsInit));
}

} // namespace duckdb
