// Package apicheck holds a test of the library's public face: no exported
// function, method, field, variable or constant of the root module's
// non-internal packages takes, returns or has a type from an internal
// package, which no caller outside the module could name or build. It has
// no code of its own.
package apicheck
