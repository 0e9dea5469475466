// The sets of schema entries DuckDB's binder sees (MoraineEntries): one per committed set of
// definitions, kept by the catalog across transactions, or one transaction's own after DDL.
#include "moraine_catalog.hpp"

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
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE, MORAINE_EXCEPTION_NONE};
	if (moraine_txn_schemas(txn, &list, CollectName, &err) != 0) {
		MoraineThrow(err);
	}
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

shared_ptr<MoraineEntries> MoraineCatalog::SharedEntries(uint64_t id) {
	lock_guard<mutex> guard(shared_lock);
	if (shared && shared_id == id) {
		return shared;
	}
	// a set still in use by a transaction on other definitions (one that began before a commit
	// that created a table, next to those after it) is found again, not built anew
	auto older = others.find(id);
	auto entries = older != others.end() ? older->second.lock() : nullptr;
	if (!entries) {
		entries = make_shared_ptr<MoraineEntries>(*this);
	}
	for (auto it = others.begin(); it != others.end();) {
		it = it->second.expired() || it->first == id ? others.erase(it) : std::next(it);
	}
	if (shared) {
		others[shared_id] = shared;
	}
	// the latest set is kept for the transactions after, even when none uses it meanwhile
	shared = entries;
	shared_id = id;
	return shared;
}

shared_ptr<MoraineEntries> MoraineTransaction::Entries() {
	auto moraine_txn = Txn();
	lock_guard<mutex> guard(entries_lock);
	if (!entries) {
		uint64_t id = 0;
		MoraineError err {nullptr, 0, MORAINE_ERROR_NONE, MORAINE_EXCEPTION_NONE};
		auto shareable = moraine_txn_definitions(moraine_txn, &id, &err);
		if (shareable < 0) {
			MoraineThrow(err);
		}
		entries = shareable == 1 ? catalog.SharedEntries(id) : make_shared_ptr<MoraineEntries>(catalog);
	}
	return entries;
}

optional_ptr<MoraineSchemaEntry> MoraineTransaction::GetSchema(const string &name) {
	return Entries()->GetSchema(Txn(), name);
}

void MoraineTransaction::ScanSchemas(const std::function<void(SchemaCatalogEntry &)> &callback) {
	// (held here: the schemas live as long as their set)
	auto entries = Entries();
	for (auto &schema : entries->Schemas(Txn())) {
		callback(schema.get());
	}
}

void MoraineTransaction::InvalidateEntries() {
	lock_guard<mutex> guard(entries_lock);
	if (entries) {
		retired.push_back(std::move(entries));
	}
	entries = nullptr;
}

} // namespace duckdb
