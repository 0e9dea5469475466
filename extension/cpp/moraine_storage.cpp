// The "moraine" storage extension: ATTACH 'moraine:<url>' opens a lake and returns its catalog.
#include "moraine_catalog.hpp"
#include "moraine_error.hpp"
#include "moraine_functions.hpp"
#include "moraine_transaction_manager.hpp"

#include "duckdb/main/attached_database.hpp"
#include "duckdb/main/extension/extension_loader.hpp"
#include "duckdb/parser/parsed_data/attach_info.hpp"
#include "duckdb/catalog/catalog_transaction.hpp"
#include "duckdb/main/config.hpp"
#include "duckdb/main/secret/secret.hpp"
#include "duckdb/main/secret/secret_manager.hpp"
#include "duckdb/storage/storage_extension.hpp"

namespace duckdb {

// An s3:// store DuckDB made read-only by itself gets its read-write mode back (src/attach.rs
// says when), but AttachedDatabase has no way back (its type is private; only
// SetReadOnlyDatabase exists). The member is reached by an explicit template instantiation,
// whose arguments may name a private member (C++17 [temp.explicit]/12); the pinned header
// declares it as used here.
namespace {
template <class Tag, typename Tag::type Member>
struct PrivateMember {
	friend typename Tag::type Get(Tag) {
		return Member;
	}
};
struct AttachedDatabaseTypeMember {
	using type = AttachedDatabaseType AttachedDatabase::*;
	friend type Get(AttachedDatabaseTypeMember);
};
template struct PrivateMember<AttachedDatabaseTypeMember, &AttachedDatabase::type>;
} // namespace

// The s3 secret for `path` (named by SECRET or DuckLake's META_SECRET, else the one DuckDB's
// secret manager matches to the path; the longest SCOPE wins): its name, type, provider and
// fields as `s3.*` store options, which Rust reads (src/s3.rs). None when no secret matches:
// the store says what to create.
static void S3Secret(ClientContext &context, const string &path, const string &name,
                     vector<pair<string, string>> &out) {
	auto &manager = SecretManager::Get(context);
	auto transaction = CatalogTransaction::GetSystemCatalogTransaction(context);
	unique_ptr<SecretEntry> named;
	SecretMatch match;
	if (!name.empty() && !(named = manager.GetSecretByName(transaction, name))) {
		throw InvalidInputException("moraine: no secret named \"%s\" exists (SECRET, DuckLake's META_SECRET) for \"%s\"",
		                            name, path);
	}
	if (!named && !(match = manager.LookupSecret(transaction, path, "s3")).HasMatch()) {
		return;
	}
	auto &secret = named ? *named->secret : match.GetSecret();
	out.emplace_back("s3.name", secret.GetName());
	out.emplace_back("s3.type", secret.GetType());
	out.emplace_back("s3.provider", secret.GetProvider());
	auto kv = dynamic_cast<const KeyValueSecret *>(&secret);
	if (!kv) {
		throw InvalidInputException("moraine: secret \"%s\" holds no key/value fields", secret.GetName());
	}
	for (auto &field : kv->secret_map) {
		if (!field.second.IsNull()) {
			out.emplace_back("s3." + field.first, field.second.ToString());
		}
	}
}

//! Each (name, value) as the C surface takes it, pointing into `pairs`.
static vector<MoraineOption> MoraineOptions(const vector<pair<string, string>> &pairs) {
	vector<MoraineOption> out;
	for (auto &pair : pairs) {
		out.push_back({pair.first.c_str(), pair.first.size(), pair.second.c_str(), pair.second.size()});
	}
	return out;
}

static unique_ptr<Catalog> MoraineAttach(optional_ptr<StorageExtensionInfo> storage_info, ClientContext &context,
                                         AttachedDatabase &db, const string &name, AttachInfo &info,
                                         AttachOptions &options) {
	// what the ATTACH opens is decided in Rust (src/attach.rs)
	vector<pair<string, string>> given;
	for (auto &option : options.options) {
		given.emplace_back(option.first, option.second.ToString());
	}
	auto left = MoraineOptions(given);
	vector<MoraineOption> named;
	for (auto &option : info.options) {
		named.push_back({option.first.c_str(), option.first.size(), "", 0});
	}
	struct Texts : MoraineCallbackState {
		string url, secret;
	} texts;
	auto on_text = [](void *ud, const char *name, size_t name_len, const char *value, size_t value_len, int64_t) {
		auto &texts = *static_cast<Texts *>(ud);
		MoraineCallback(texts, [&]() {
			(string(name, name_len) == "url" ? texts.url : texts.secret) = string(value, value_len);
		});
	};
	MoraineAttachPlan plan;
	MoraineError err {};
	MoraineCheck(moraine_attach_plan(info.path.c_str(), info.path.size(), left.data(), left.size(), named.data(),
	                                 named.size(), options.access_mode == AccessMode::READ_ONLY,
	                                 DBConfig::GetConfig(context).options.access_mode == AccessMode::AUTOMATIC, &plan,
	                                 &texts, on_text, &err), err);
	MoraineRethrow(texts);
	auto &url = texts.url;
	// DuckDB's file-access rules (enable_external_access = false, allowed_directories) hold for
	// the directory or bucket the store lives in, as moraine resolves it ("..", relative paths)
	// (a copy that fails leaves `resolved` holding nothing but the marker: refused, never skipped)
	string resolved;
	moraine_url_access_path(url.c_str(), url.size(), &resolved, [](void *ud, const char *path, size_t len) {
		auto &out = *static_cast<string *>(ud);
		try {
			out = string(path, len);
		} catch (...) {
			out.clear();
			out.push_back('\0');
		}
	});
	if (resolved.size() == 1 && resolved[0] == '\0') {
		throw PermissionException("moraine: cannot attach \"%s\": its directory could not be checked against "
		                          "DuckDB's file-access rules",
		                          url);
	}
	if (!resolved.empty() && !DBConfig::GetConfig(context).CanAccessFile(resolved, FileType::FILE_TYPE_DIR)) {
		throw PermissionException("moraine: cannot attach \"%s\": \"%s\" is outside what DuckDB may access "
		                          "(enable_external_access = false; see allowed_directories)",
		                          url, resolved);
	}
	if (plan.read_write_again) {
		db.*Get(AttachedDatabaseTypeMember()) = AttachedDatabaseType::READ_WRITE_DATABASE;
		options.access_mode = AccessMode::AUTOMATIC;
	}
	// the store's options, which Rust reads (src/settings.rs, src/s3.rs): the secret's fields,
	// and the settings an ATTACH reads (an INTERVAL as whole microseconds)
	struct Store : MoraineCallbackState {
		ClientContext &context;
		vector<pair<string, string>> options;
		explicit Store(ClientContext &context) : context(context) {
		}
	} store(context);
	if (plan.s3) {
		S3Secret(context, url, texts.secret, store.options);
	}
	moraine_attach_settings(plan.s3, &store, [](void *ud, const char *name_p, size_t len) {
		auto &store = *static_cast<Store *>(ud);
		MoraineCallback(store, [&]() {
			string name(name_p, len);
			Value value;
			if (store.context.TryGetCurrentSetting(name, value) && !value.IsNull()) {
				auto interval = value.type().id() == LogicalTypeId::INTERVAL;
				store.options.emplace_back("setting." + name, interval ? to_string(Interval::GetMicro(
				                                                               value.GetValue<interval_t>()))
				                                                       : value.ToString());
			}
		});
	});
	MoraineRethrow(store);
	auto marshalled = MoraineOptions(store.options);
	auto opened = moraine_store_open(url.c_str(), url.size(), plan.read_only ? 1 : 0, marshalled.data(),
	                                 marshalled.size(), &err);
	if (!opened) {
		MoraineThrow(err);
	}
	return make_uniq<MoraineCatalog>(db, make_shared_ptr<MoraineStoreRef>(opened), url, plan.read_only);
}

static unique_ptr<TransactionManager> MoraineCreateTransactionManager(optional_ptr<StorageExtensionInfo> storage_info,
                                                                     AttachedDatabase &db, Catalog &catalog) {
	return make_uniq<MoraineTransactionManager>(db, catalog.Cast<MoraineCatalog>());
}

static void MoraineCheckMaxCommitSize(ClientContext &context, SetScope scope, Value &parameter) {
	if (parameter.IsNull()) {
		return;
	}
	auto text = parameter.ToString();
	MoraineError err {};
	MoraineCheck(moraine_check_max_commit_size(text.c_str(), text.size(), &err), err);
}

static void MoraineSetLogLevel(ClientContext &context, SetScope scope, Value &parameter) {
	auto spec = parameter.IsNull() ? string(moraine_setting_default("moraine_log_level")) : parameter.ToString();
	MoraineError err {};
	MoraineCheck(moraine_set_log_level(spec.c_str(), spec.size(), &err), err);
}

static shared_ptr<StorageExtension> MoraineStorageExtension() {
	auto extension = make_shared_ptr<StorageExtension>();
	extension->attach = MoraineAttach;
	extension->create_transaction_manager = MoraineCreateTransactionManager;
	return extension;
}

} // namespace duckdb

// Called from the Rust entry point `moraine_duckdb_cpp_init`.
extern "C" void moraine_cpp_register(void *loader_ptr) {
	auto &loader = *static_cast<duckdb::ExtensionLoader *>(loader_ptr);
	auto &config = duckdb::DBConfig::GetConfig(loader.GetDatabaseInstance());
	duckdb::StorageExtension::Register(config, "moraine", duckdb::MoraineStorageExtension());
	// the settings Rust lists (src/settings.rs), all global: DuckLake attaches its catalog on its
	// own connection
	struct Register : duckdb::MoraineCallbackState {
		duckdb::DBConfig &config;
		explicit Register(duckdb::DBConfig &config) : config(config) {
		}
	} registered(config);
	moraine_settings(&registered, [](void *ud, const MoraineSetting *setting) {
		auto &registered = *static_cast<Register *>(ud);
		duckdb::MoraineCallback(registered, [&]() {
			std::string name(setting->name, setting->name_len);
			if (registered.config.HasExtensionOption(name)) {
				return;
			}
			auto type = setting->ty == MORAINE_SETTING_INTERVAL ? duckdb::LogicalType::INTERVAL
			                                                      : duckdb::LogicalType::VARCHAR;
			auto on_set = setting->on_set == MORAINE_ON_SET_CHECK_MAX_COMMIT_SIZE ? duckdb::MoraineCheckMaxCommitSize
			              : setting->on_set == MORAINE_ON_SET_SET_LOG_LEVEL        ? duckdb::MoraineSetLogLevel
			                                                                       : nullptr;
			registered.config.AddExtensionOption(
			    name, std::string(setting->description, setting->description_len), type,
			    duckdb::Value(std::string(setting->default_value, setting->default_len)).DefaultCastAs(type), on_set,
			    duckdb::SetScope::GLOBAL);
		});
	});
	duckdb::MoraineRethrow(registered);
	duckdb::MoraineRegisterFunctions(loader);
}
