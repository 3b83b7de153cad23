// Package doccheck holds the tests that keep the documentation usable
// without the source: every Go code block of README.md, CONTRIBUTING.md
// and docs/*.md builds and passes go vet, every API name they mention in
// backticks resolves to a declaration of the workspace, and the README
// stays short (under 200 lines, none over 300 characters).
//
// It lives in the lab's module because the code blocks use every
// integration (gRPC, Prometheus) beside the library.
//
// # Code blocks
//
// A ```go block is one of two kinds:
//
//   - A whole file, when its first line starts with "package": it is built
//     as a package of its own, as written.
//
//   - A snippet, otherwise: the body of a function returning error. The
//     names it uses without declaring them are that function's parameters,
//     declared by an HTML comment (invisible once rendered) on the line just
//     before the block, in Go's parameter syntax:
//
//     <!-- snippet: ctx context.Context, ctl *moirai.Controller, mux *http.ServeMux -->
//
//     A snippet built with another module's requirements than the lab's
//     (otelmoirai's, which the lab does not require) names it:
//     <!-- snippet in otelmoirai/test: addr string -->
//
//     The imports follow from the package names the snippet and its
//     parameters use (the standard library's, the workspace's, gRPC's and
//     Prometheus's; see imports in the test). A snippet that ends with a
//     return statement gets no "return nil" after it.
//
// The test writes each block as a package of a module in a temporary
// directory, which requires what the lab requires (nothing is written into
// the tree), and runs go vet on all of them at once; errors point at the
// Markdown file's lines.
//
// # API names
//
// A code span of the form `pkg.Name`, `pkg.Type.Member`, `Type.Member`
// (optionally followed by a call's parentheses) names an API when pkg is
// the name of a workspace package or Type the name of a workspace type;
// the name must then be declared: an exported top-level declaration of
// such a package, or a method, field or interface method of such a type
// (promoted through embedded fields included). Spans of other packages
// (`context.Cause`, `http.Handler`) and of variables (`ctl.Snapshot()`)
// are not checked.
package doccheck
