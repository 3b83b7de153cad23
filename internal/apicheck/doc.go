// Package apicheck holds tests of the library's shape. It has no code of
// its own.
//
// TestNoInternalTypesInAPI: no exported function, method, field, variable
// or constant of the root module's non-internal packages takes, returns or
// has a type from an internal package, which no caller outside the module
// could name or build, unless a public package declares an alias of it
// (package task's aliases of internal/taskx's types).
//
// TestFewSeams: the library's packages call each other's code directly;
// a package-level variable of an internal package that can hold another
// package's code (a hook) is one of the few seams the test lists.
package apicheck
