// moraine's own SQL functions (moraine_functions.cpp).
#pragma once

#include "duckdb.hpp"

namespace duckdb {

class ExtensionLoader;

void MoraineRegisterFunctions(ExtensionLoader &loader);

} // namespace duckdb
