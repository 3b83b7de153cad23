package moirai_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestDocStartsWithTheExample checks that the package doc's first code
// block is the body of the runnable Example, so that what go doc shows
// first is code that builds and runs.
func TestDocStartsWithTheExample(t *testing.T) {
	fset := token.NewFileSet()
	doc, err := parser.ParseFile(fset, "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	for _, line := range strings.Split(doc.Doc.Text(), "\n") {
		switch {
		case strings.HasPrefix(line, "\t"):
			block = append(block, strings.TrimPrefix(line, "\t"))
		case line == "" && len(block) > 0:
			block = append(block, "")
		case len(block) > 0:
			goto done
		}
	}
done:
	got := strings.TrimSpace(strings.Join(block, "\n"))

	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(fset, "example_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "Example" && fd.Recv == nil {
			body := string(src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset])
			body, _, _ = strings.Cut(body, "// Output:")
			var lines []string
			for _, l := range strings.Split(body, "\n") {
				lines = append(lines, strings.TrimPrefix(l, "\t"))
			}
			want = strings.TrimSpace(strings.Join(lines, "\n"))
		}
	}
	if want == "" {
		t.Fatal("example_test.go has no Example")
	}
	if got != want {
		t.Errorf("the package doc's first code block is not the Example's body:\n--- doc.go\n%s\n--- Example\n%s", got, want)
	}
}
