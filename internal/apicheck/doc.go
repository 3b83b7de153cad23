// Package apicheck holds a test of the library's public face: no exported
// function, method, field, variable or constant of the root module's
// non-internal packages takes, returns or has a type from an internal
// package, which no caller outside the module could name or build, unless a
// public package declares an alias of it (package task's aliases of
// internal/taskx's types). It has no code of its own.
package apicheck
