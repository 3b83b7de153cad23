// Package guard applies moirai's targeted cancellation to a database server
// from the outside. A [Source] (package guard/postgres or guard/mysql) reads
// who holds and who waits for what from the server's own views; the guard
// turns successive polls into the same [snapshot.Snapshot] the in-process
// controller builds, runs the library's Atropos policy on it unchanged, and
// cancels the culprit's statement through the server's own cancel command,
// verified so that it can never hit a different statement.
package guard

import "github.com/moirai-go/moirai/snapshot"

var _ snapshot.Snapshot
