// moraine's own SQL functions: operator views of a lake's store.
#include "moraine_catalog.hpp"

#include "duckdb/main/extension/extension_loader.hpp"

namespace duckdb {

struct KeyspaceRow {
	string keyspace;
	string kind;
	int64_t keys;
};

struct KeyspaceBindData : public TableFunctionData, MoraineCallbackState {
	vector<KeyspaceRow> rows;
};

static void OnKeyspace(void *ud, const char *keyspace, size_t keyspace_len, const char *kind, size_t kind_len,
                       uint64_t keys) {
	auto &data = *static_cast<KeyspaceBindData *>(ud);
	MoraineCallback(data, [&]() {
		data.rows.push_back(
		    KeyspaceRow {string(keyspace, keyspace_len), string(kind, kind_len), static_cast<int64_t>(keys)});
	});
}

//! moraine_keyspace('<metadata catalog>'): keys per keyspace and kind in the committed store.
static unique_ptr<FunctionData> KeyspaceBind(ClientContext &context, TableFunctionBindInput &input,
                                             vector<LogicalType> &return_types, vector<string> &names) {
	auto name = input.inputs[0].GetValue<string>();
	auto &catalog = Catalog::GetCatalog(context, name);
	if (catalog.GetCatalogType() != "moraine") {
		throw InvalidInputException("moraine_keyspace: \"%s\" is a %s catalog, not a moraine lake (for a DuckLake "
		                            "lake pass its metadata catalog, e.g. '__ducklake_metadata_<lake>')",
		                            name, catalog.GetCatalogType());
	}
	auto result = make_uniq<KeyspaceBindData>();
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE};
	if (moraine_store_keyspace(catalog.Cast<MoraineCatalog>().store->store, result.get(), OnKeyspace, &err) != 0) {
		MoraineThrow(err);
	}
	MoraineRethrow(*result);
	names = {"keyspace", "kind", "keys"};
	return_types = {LogicalType::VARCHAR, LogicalType::VARCHAR, LogicalType::BIGINT};
	return std::move(result);
}

struct KeyspaceState : public GlobalTableFunctionState {
	idx_t position = 0;
};

static unique_ptr<GlobalTableFunctionState> KeyspaceInit(ClientContext &context, TableFunctionInitInput &input) {
	return make_uniq<KeyspaceState>();
}

static void KeyspaceScan(ClientContext &context, TableFunctionInput &input, DataChunk &output) {
	auto &rows = input.bind_data->Cast<KeyspaceBindData>().rows;
	auto &state = input.global_state->Cast<KeyspaceState>();
	idx_t count = 0;
	while (state.position < rows.size() && count < STANDARD_VECTOR_SIZE) {
		auto &row = rows[state.position++];
		output.SetValue(0, count, Value(row.keyspace));
		output.SetValue(1, count, Value(row.kind));
		output.SetValue(2, count, Value::BIGINT(row.keys));
		count++;
	}
	output.SetCardinality(count);
}

void MoraineRegisterFunctions(ExtensionLoader &loader) {
	TableFunction keyspace("moraine_keyspace", {LogicalType::VARCHAR}, KeyspaceScan, KeyspaceBind, KeyspaceInit);
	loader.RegisterFunction(keyspace);
}

} // namespace duckdb
