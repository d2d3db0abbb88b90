package hygiene

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A Finding is a call that may stop a test from a goroutine other than
// the test's own.
type Finding struct {
	Pos  token.Position
	Call string // as written, e.g. "require.NoError" or "t.Fatal"
	In   string // what runs the function literal: "go", "Go", "AfterFunc", "Eventually", "HandlerFunc"
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s in a function run by %s, off the test's goroutine: collect the error and assert in the test", f.Pos, f.Call, f.In)
}

// failNow are the testing.TB methods that call runtime.Goexit, which ends
// only the goroutine that calls them: called from another goroutine, the
// test goes on (or the process panics) instead of stopping.
var failNow = map[string]bool{"Fatal": true, "Fatalf": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true}

// FailNowOffTestGoroutine reports each require.* call (they call FailNow)
// and each t.Fatal, FailNow or Skip in a function literal that runs on
// another goroutine: one started by a go statement, passed to a Go method
// (sync.WaitGroup, errgroup.Group), to time.AfterFunc, to a testify
// Eventually or Never condition (run on a goroutine of its own; the
// CollectT of EventuallyWithT is the way to assert there), or converted to
// an http.HandlerFunc (a test server's handler).
//
// It reads syntax only, so it is simple, not complete: it sees the call
// written in the literal (or a literal nested in it), not one made by a
// helper the literal calls (h.row(t, key) that calls require inside), nor
// a named function started with go. go vet's testinggoroutine and
// staticcheck's SA2002 catch t.Fatal in a go statement's literal only.
func FailNowOffTestGoroutine(fset *token.FileSet, file *ast.File) []Finding {
	var out []Finding
	check := func(lit *ast.FuncLit, in string) {
		ast.Inspect(lit.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if x.Name == "require" || failNow[sel.Sel.Name] {
				out = append(out, Finding{Pos: fset.Position(call.Pos()), Call: x.Name + "." + sel.Sel.Name, In: in})
			}
			return true
		})
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			if lit, ok := n.Call.Fun.(*ast.FuncLit); ok {
				check(lit, "go")
			}
		case *ast.CallExpr:
			name := ""
			switch fun := n.Fun.(type) {
			case *ast.SelectorExpr:
				name = fun.Sel.Name
			case *ast.Ident:
				name = fun.Name
			}
			switch name {
			case "Go", "AfterFunc", "HandlerFunc", "Eventually", "Eventuallyf", "Never", "Neverf":
				for _, arg := range n.Args {
					if lit, ok := arg.(*ast.FuncLit); ok {
						check(lit, name)
					}
				}
			}
		}
		return true
	})
	return out
}

// FailNowOffTestGoroutineIn runs FailNowOffTestGoroutine on every _test.go
// file under root, skipping directories whose names begin with "." (the
// virtualenvs, .git) and bin.
func FailNowOffTestGoroutineIn(root string) ([]Finding, error) {
	var out []Finding
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, FailNowOffTestGoroutine(fset, f)...)
		return nil
	})
	return out, err
}
