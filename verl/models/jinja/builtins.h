// File: verl/models/jinja/builtins.h
//
// The built-ins chat templates use, with Jinja2's (and Python's) behaviour:
//   filters    length/count, tojson(indent), trim, string, safe, upper,
//              lower, title, capitalize, replace, default/d, join, first,
//              last, list, reverse, items, int, float, abs, select, reject,
//              selectattr, rejectattr, map, unique, sort, indent
//   tests      defined, undefined, none, boolean, true, false, integer,
//              float, number, string, mapping, iterable, sequence, callable,
//              odd, even, divisibleby, eq/equalto/==, ne/!=, lt/lessthan/<,
//              le/<=, gt/greaterthan/>, ge/>=, in, sameas, lower, upper
//   functions  range, namespace, dict, raise_exception, strftime_now
//   str        startswith, endswith, strip, lstrip, rstrip, split, upper,
//              lower, title, capitalize, replace, find, count, join
//   dict       items, keys, values, get
// String lengths, indices and whitespace are by code point, like Python str.
#ifndef VERL_MODELS_JINJA_BUILTINS_H_
#define VERL_MODELS_JINJA_BUILTINS_H_

#include "verl/models/jinja/registry.h"

namespace verl::models::jinja {

void AddFilters(Registry* registry);    // builtin_filters.cc
void AddTests(Registry* registry);      // builtin_tests.cc
void AddFunctions(Registry* registry);  // builtin_functions.cc (+ methods)

// A registry with all of the above, built once.
const Registry& DefaultRegistry();

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_BUILTINS_H_
