// The sets of schema entries DuckDB's binder sees (MoraineEntries): one per committed set of
// definitions, kept by the catalog across transactions, or one transaction's own after DDL.
#include "moraine_entries.hpp"

#include "moraine_catalog.hpp"
#include "moraine_error.hpp"

#include "duckdb/parser/parsed_data/create_schema_info.hpp"

namespace duckdb {

struct NameList : MoraineCallbackState {
	vector<string> names;
};

static void CollectName(void *ud, const char *name, size_t len) {
	auto &list = *static_cast<NameList *>(ud);
	MoraineCallback(list, [&]() { list.names.emplace_back(name, len); });
}

void MoraineEntries::LoadSchemas(MoraineTxn *txn) {
	{
		lock_guard<mutex> guard(lock);
		if (schemas_loaded) {
			return;
		}
	}
	// read outside the lock, as a schema's tables are (MoraineSchemaEntry::LoadTables)
	NameList list;
	MoraineError err {};
	MoraineCheck(moraine_txn_schemas(txn, &list, CollectName, &err), err);
	MoraineRethrow(list);
	lock_guard<mutex> guard(lock);
	if (schemas_loaded) {
		// another transaction of this set loaded them meanwhile: its entries may be in use
		return;
	}
	for (auto &name : list.names) {
		CreateSchemaInfo info;
		info.schema = name;
		schemas[name] = make_uniq<MoraineSchemaEntry>(catalog, info, *this);
	}
	schemas_loaded = true;
}

optional_ptr<MoraineSchemaEntry> MoraineEntries::GetSchema(MoraineTxn *txn, const string &name) {
	LoadSchemas(txn);
	lock_guard<mutex> guard(lock);
	auto entry = schemas.find(name);
	if (entry == schemas.end()) {
		return nullptr;
	}
	return entry->second.get();
}

vector<reference<MoraineSchemaEntry>> MoraineEntries::Schemas(MoraineTxn *txn) {
	LoadSchemas(txn);
	lock_guard<mutex> guard(lock);
	vector<reference<MoraineSchemaEntry>> result;
	for (auto &entry : schemas) {
		result.push_back(*entry.second);
	}
	return result;
}

} // namespace duckdb
