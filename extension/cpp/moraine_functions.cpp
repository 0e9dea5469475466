// moraine's own SQL functions: the operator views of a lake's store (src/views.rs says each
// one's arguments, columns and rows) and moraine_version().
#include "moraine_functions.hpp"

#include "moraine_catalog.hpp"
#include "moraine_error.hpp"

#include "duckdb/main/database_manager.hpp"
#include "duckdb/main/extension/extension_loader.hpp"
#include "duckdb/transaction/meta_transaction.hpp"

namespace duckdb {

//! A view's columns and rows: read at bind, or for moraine_reclaim made at its scan (which may
//! run after a DETACH and ATTACH of a prepared statement: it looks the lake up again by name).
struct MoraineViewData : public TableFunctionData, MoraineCallbackState {
	vector<string> names;
	vector<LogicalType> types;
	vector<vector<Value>> rows;
	shared_ptr<MoraineStoreRef> store;
	string named_db, moraine_db;
	//! The view makes its rows at its scan (moraine_reclaim), each execution anew.
	bool at_scan = false;
};

static void OnField(void *ud, size_t row, const char *name, size_t name_len, uint32_t kind, int64_t i,
                    const char *text, size_t text_len, bool is_null) {
	auto &data = *static_cast<MoraineViewData *>(ud);
	MoraineCallback(data, [&]() {
		auto type = kind == MORAINE_FIELD_TEXT     ? LogicalType::VARCHAR
		            : kind == MORAINE_FIELD_BIGINT ? LogicalType::BIGINT
		                                           : LogicalType::TIMESTAMP_TZ;
		auto value = is_null                         ? Value(type)
		             : kind == MORAINE_FIELD_TEXT   ? Value(string(text, text_len))
		             : kind == MORAINE_FIELD_BIGINT ? Value::BIGINT(i)
		                                            : Value::TIMESTAMPTZ(timestamp_tz_t(i));
		if (data.rows.size() <= row) {
			data.rows.resize(row + 1);
		}
		data.rows[row].push_back(std::move(value));
		if (data.names.size() < data.rows[0].size()) {
			// the columns, which come first
			data.names.emplace_back(name, name_len);
			data.types.push_back(type);
		}
	});
}

static unique_ptr<FunctionData> ViewBind(ClientContext &context, TableFunctionBindInput &input,
                                         vector<LogicalType> &return_types, vector<string> &names) {
	auto &function = input.table_function.name;
	auto name = input.inputs[0].GetValue<string>();
	auto &catalog = Catalog::GetCatalog(context, name);
	// a moraine catalog itself, or a DuckLake lake whose metadata catalog (DuckLake's default
	// name for it) is one
	auto metadata = catalog.GetCatalogType() == "ducklake"
	                    ? Catalog::GetCatalogEntry(context, "__ducklake_metadata_" + name)
	                    : optional_ptr<Catalog>(&catalog);
	if (!metadata || metadata->GetCatalogType() != "moraine") {
		throw InvalidInputException("%s: \"%s\" is a %s catalog whose metadata is not in moraine (pass a DuckLake "
		                            "lake attached with 'ducklake:moraine:...', or its metadata catalog)",
		                            function, name, catalog.GetCatalogType());
	}
	auto &lake = metadata->Cast<MoraineCatalog>();
	auto result = make_uniq<MoraineViewData>();
	MoraineError err {};
	MoraineCheck(moraine_view_columns(function.c_str(), function.size(), result.get(), OnField, &err), err);
	MoraineRethrow(*result);
	result->rows.clear();
	result->store = lake.store;
	result->named_db = catalog.GetAttached().GetName();
	result->moraine_db = lake.GetAttached().GetName();
	auto argument = input.inputs.size() > 1 && !input.inputs[1].IsNull() ? input.inputs[1].ToString() : string();
	auto rc = moraine_view_rows(lake.store->store, function.c_str(), function.size(), argument.c_str(),
	                            argument.size(), result.get(), OnField, &err);
	if (rc == 1) {
		MoraineThrow(err);
	}
	MoraineRethrow(*result);
	result->at_scan = rc == 2;
	names = result->names;
	return_types = result->types;
	return std::move(result);
}

struct MoraineViewState : public GlobalTableFunctionState {
	idx_t position = 0;
	//! The rows this execution made, for a view made at its scan.
	MoraineViewData made;
};

static unique_ptr<GlobalTableFunctionState> ViewInit(ClientContext &context, TableFunctionInitInput &input) {
	return make_uniq<MoraineViewState>();
}

//! moraine_reclaim's one row, made now into `out`: the facts about the caller Rust decides on
//! (src/store/reclaim.rs, Caller).
static void Reclaim(ClientContext &context, const MoraineViewData &bind, MoraineViewData &out) {
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
	MoraineError err {};
	MoraineCheck(moraine_store_reclaim(bind.store->store, !context.transaction.IsAutoCommit(), read_lake, rebound,
	                                   meta.GetCurrentTransactionStartTimestamp().value, &out, OnField, &err), err);
	MoraineRethrow(out);
}

static void ViewScan(ClientContext &context, TableFunctionInput &input, DataChunk &output) {
	auto &bind = input.bind_data->Cast<MoraineViewData>();
	auto &state = input.global_state->Cast<MoraineViewState>();
	if (bind.at_scan && state.position == 0 && state.made.rows.empty()) {
		Reclaim(context, bind, state.made);
	}
	auto &rows = bind.at_scan ? state.made.rows : bind.rows;
	idx_t count = 0;
	for (; state.position < rows.size() && count < STANDARD_VECTOR_SIZE; state.position++, count++) {
		for (idx_t c = 0; c < rows[state.position].size(); c++) {
			output.SetValue(c, count, rows[state.position][c]);
		}
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
	for (string name :
	     {"moraine_keyspace", "moraine_status", "moraine_metrics", "moraine_reclaim", "moraine_objects_holding"}) {
		// the lake's name, then the view's own arguments (Rust says how many)
		vector<LogicalType> arguments(1 + MaxValue(0, moraine_view_arguments(name.c_str(), name.size())),
		                              LogicalType::VARCHAR);
		loader.RegisterFunction(TableFunction(name, arguments, ViewScan, ViewBind, ViewInit));
	}
}

} // namespace duckdb
