// The catalog of one attached lake: a thin subclass of DuckDB's Catalog that marshals
// between DuckDB and the Rust core (moraine_ffi.h). No catalog logic lives here.
#pragma once

#include "duckdb/catalog/catalog.hpp"
#include "moraine_store_ref.hpp"

namespace duckdb {

class MoraineEntries;

class MoraineCatalog : public Catalog {
public:
	MoraineCatalog(AttachedDatabase &db, shared_ptr<MoraineStoreRef> store, string url, bool read_only);

	shared_ptr<MoraineStoreRef> store;
	string url;
	bool read_only;

	//! The entries built for the committed definitions with this id (moraine_txn_definitions):
	//! the latest set is kept, and an older one found again while a transaction still uses it;
	//! otherwise a set is built anew.
	shared_ptr<MoraineEntries> SharedEntries(uint64_t id);

private:
	mutex shared_lock;
	uint64_t shared_id = 0;
	shared_ptr<MoraineEntries> shared;
	unordered_map<uint64_t, weak_ptr<MoraineEntries>> others;

public:
	void Initialize(bool load_builtin) override {
	}
	string GetCatalogType() override {
		return "moraine";
	}
	optional_ptr<CatalogEntry> CreateSchema(CatalogTransaction transaction, CreateSchemaInfo &info) override;
	void ScanSchemas(ClientContext &context, std::function<void(SchemaCatalogEntry &)> callback) override;
	optional_ptr<SchemaCatalogEntry> LookupSchema(CatalogTransaction transaction, const EntryLookupInfo &schema_lookup,
	                                              OnEntryNotFound if_not_found) override;
	PhysicalOperator &PlanCreateTableAs(ClientContext &context, PhysicalPlanGenerator &planner, LogicalCreateTable &op,
	                                    PhysicalOperator &plan) override;
	PhysicalOperator &PlanInsert(ClientContext &context, PhysicalPlanGenerator &planner, LogicalInsert &op,
	                             optional_ptr<PhysicalOperator> plan) override;
	PhysicalOperator &PlanDelete(ClientContext &context, PhysicalPlanGenerator &planner, LogicalDelete &op,
	                             PhysicalOperator &plan) override;
	PhysicalOperator &PlanUpdate(ClientContext &context, PhysicalPlanGenerator &planner, LogicalUpdate &op,
	                             PhysicalOperator &plan) override;
	DatabaseSize GetDatabaseSize(ClientContext &context) override;
	bool InMemory() override;
	string GetDBPath() override;
	void DropSchema(ClientContext &context, DropInfo &info) override;
};

} // namespace duckdb
