// The "moraine" storage extension: ATTACH 'moraine:<url>' opens a lake and returns its catalog.
#include "moraine_catalog.hpp"

#include "duckdb/main/attached_database.hpp"
#include "duckdb/main/extension/extension_loader.hpp"
#include "duckdb/parser/parsed_data/attach_info.hpp"

namespace duckdb {

static unique_ptr<Catalog> MoraineAttach(optional_ptr<StorageExtensionInfo> storage_info, ClientContext &context,
                                         AttachedDatabase &db, const string &name, AttachInfo &info,
                                         AttachOptions &options) {
	for (auto &option : options.options) {
		throw InvalidInputException("moraine: unknown ATTACH option \"%s\" for \"%s\" (moraine accepts only "
		                            "READ_ONLY / READ_WRITE)",
		                            option.first, info.path);
	}
	bool read_only = options.access_mode == AccessMode::READ_ONLY;
	MoraineError err {nullptr, 0};
	auto store = moraine_store_open(info.path.c_str(), info.path.size(), read_only ? 1 : 0, &err);
	if (!store) {
		MoraineThrow(err);
	}
	return make_uniq<MoraineCatalog>(db, make_shared_ptr<MoraineStoreRef>(store), info.path, read_only);
}

static unique_ptr<TransactionManager> MoraineCreateTransactionManager(optional_ptr<StorageExtensionInfo> storage_info,
                                                                     AttachedDatabase &db, Catalog &catalog) {
	return make_uniq<MoraineTransactionManager>(db, catalog.Cast<MoraineCatalog>());
}

shared_ptr<StorageExtension> MoraineStorageExtension() {
	auto extension = make_shared_ptr<StorageExtension>();
	extension->attach = MoraineAttach;
	extension->create_transaction_manager = MoraineCreateTransactionManager;
	return extension;
}

} // namespace duckdb

// Called from the Rust entry point `moraine_duckdb_cpp_init`.
extern "C" void moraine_cpp_register(void *loader_ptr) {
	auto &loader = *static_cast<duckdb::ExtensionLoader *>(loader_ptr);
	auto &db = loader.GetDatabaseInstance();
	duckdb::StorageExtension::Register(duckdb::DBConfig::GetConfig(db), "moraine", duckdb::MoraineStorageExtension());
	duckdb::MoraineRegisterFunctions(loader);
}
