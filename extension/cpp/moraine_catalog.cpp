// The catalog of one attached lake: schemas come from the current transaction's view.
#include "moraine_catalog.hpp"

#include "moraine_entries.hpp"
#include "moraine_error.hpp"
#include "moraine_transaction.hpp"

#include "duckdb/parser/parsed_data/create_schema_info.hpp"
#include "duckdb/parser/parsed_data/drop_info.hpp"
#include "duckdb/storage/database_size.hpp"

namespace duckdb {

MoraineCatalog::MoraineCatalog(AttachedDatabase &db, shared_ptr<MoraineStoreRef> store_p, string url_p,
                               bool read_only_p)
    : Catalog(db), store(std::move(store_p)), url(std::move(url_p)), read_only(read_only_p) {
}

optional_ptr<CatalogEntry> MoraineCatalog::CreateSchema(CatalogTransaction transaction, CreateSchemaInfo &info) {
	auto &moraine_transaction = MoraineTransaction::Get(transaction);
	bool if_not_exists = info.on_conflict == OnCreateConflict::IGNORE_ON_CONFLICT;
	if (info.on_conflict == OnCreateConflict::REPLACE_ON_CONFLICT) {
		throw NotImplementedException("moraine: CREATE OR REPLACE SCHEMA is not supported");
	}
	MoraineError err {};
	MoraineCheck(moraine_txn_create_schema(moraine_transaction.Txn(), info.schema.c_str(), info.schema.size(),
	                                       if_not_exists ? 1 : 0, &err), err);
	moraine_transaction.InvalidateEntries();
	return moraine_transaction.GetSchema(info.schema).get();
}

void MoraineCatalog::ScanSchemas(ClientContext &context, std::function<void(SchemaCatalogEntry &)> callback) {
	MoraineTransaction::Get(context, *this).ScanSchemas(callback);
}

optional_ptr<SchemaCatalogEntry> MoraineCatalog::LookupSchema(CatalogTransaction transaction,
                                                              const EntryLookupInfo &schema_lookup,
                                                              OnEntryNotFound if_not_found) {
	auto &name = schema_lookup.GetEntryName();
	auto schema = MoraineTransaction::Get(transaction).GetSchema(name);
	if (!schema && if_not_found == OnEntryNotFound::THROW_EXCEPTION) {
		throw CatalogException("moraine: schema \"%s\" does not exist in lake \"%s\"", name, url);
	}
	return schema.get();
}

void MoraineCatalog::DropSchema(ClientContext &context, DropInfo &info) {
	auto &moraine_transaction = MoraineTransaction::Get(context, *this);
	MoraineError err {};
	MoraineCheck(moraine_txn_drop_schema(moraine_transaction.Txn(), info.name.c_str(), info.name.size(),
	                                     info.if_not_found == OnEntryNotFound::RETURN_NULL ? 1 : 0, &err), err);
	moraine_transaction.InvalidateEntries();
}

PhysicalOperator &MoraineCatalog::PlanCreateTableAs(ClientContext &context, PhysicalPlanGenerator &planner,
                                                    LogicalCreateTable &op, PhysicalOperator &plan) {
	throw NotImplementedException("moraine: CREATE TABLE AS is not supported; moraine serves DuckLake's tables");
}

DatabaseSize MoraineCatalog::GetDatabaseSize(ClientContext &context) {
	return DatabaseSize();
}

bool MoraineCatalog::InMemory() {
	return StringUtil::StartsWith(url, "memory://");
}

string MoraineCatalog::GetDBPath() {
	return url;
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

} // namespace duckdb
