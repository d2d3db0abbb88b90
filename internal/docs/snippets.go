package docs

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
)

// FragmentMarker, on the line before a ```go block, says the block is a
// fragment: statements, not a file. Fragments are compiled inside a
// function whose parameters are Givens, with the imports they use added.
const FragmentMarker = "<!-- snippet: fragment -->"

// Givens are the names a fragment may use without declaring them: what an
// application around it would have at hand.
const Givens = "ctx context.Context, cfg aws.Config, client *dynamodb.Client, p *outflow.Producer, " +
	"body, created, lines, audit []byte, orderWrites []types.TransactWriteItem"

// givenImports are the packages Givens' types need.
var givenImports = []string{"context", "aws", "dynamodb", "outflow", "types"}

// knownImports are the packages a fragment may use by name.
var knownImports = map[string]string{
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"log":      "log",
	"os":       "os",
	"strings":  "strings",
	"time":     "time",
	"aws":      "github.com/aws/aws-sdk-go-v2/aws",
	"config":   "github.com/aws/aws-sdk-go-v2/config",
	"dynamodb": "github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"types":    "github.com/aws/aws-sdk-go-v2/service/dynamodb/types",
	"outflow":  "github.com/outflowhq/outflow",
}

// A Snippet is one ```go block of a Markdown file.
type Snippet struct {
	// File is the Markdown file's path, as the compiler's errors name it.
	File string
	// Line is the line of the block's first line of code.
	Line int
	Code string
	// Fragment is set when FragmentMarker precedes the block.
	Fragment bool
}

// GoSnippets returns the ```go blocks of md, which is file.
func GoSnippets(file, md string) []Snippet {
	var out []Snippet
	prev := ""
	for _, b := range blocks(md) {
		if b.fenced && b.info == "go" {
			out = append(out, Snippet{File: file, Line: b.line, Code: b.text, Fragment: prev == FragmentMarker})
		}
		if b.fenced || strings.TrimSpace(b.text) != "" {
			prev = strings.TrimSpace(b.text)
		}
	}
	return out
}

// ErrNotAFile is a snippet that neither starts with a package clause nor
// is marked as a fragment.
var ErrNotAFile = errors.New("a ```go block must be a whole file (starting with package) or marked " + FragmentMarker)

// Source returns a Go file that compiles the snippet: a whole file as it
// is; a fragment inside a block of a function that takes Givens, with the
// imports it uses and a use of each name it declares (so that "declared
// and not used" does not fail a fragment that only shows a call). A
// //line directive makes the compiler's errors name the Markdown file and
// line.
func (s Snippet) Source() (string, error) {
	directive := fmt.Sprintf("//line %s:%d\n", s.File, s.Line)
	if !s.Fragment {
		if !strings.HasPrefix(strings.TrimSpace(s.Code), "package ") {
			return "", fmt.Errorf("%s:%d: %w", s.File, s.Line, ErrNotAFile)
		}
		return directive + s.Code + "\n", nil
	}
	body := "func _(" + Givens + ") {\n\t{\n" + directive + s.Code + "\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, s.File, "package snippet\n\n"+body+"\t}\n}\n", 0)
	if err != nil {
		return "", err
	}
	inner := f.Decls[0].(*ast.FuncDecl).Body.List[0].(*ast.BlockStmt)
	var uses []string
	for _, stmt := range inner.List {
		uses = append(uses, declared(stmt)...)
	}
	for _, name := range uses {
		body += "\t_ = " + name + "\n"
	}
	imports := []string{}
	for name := range usedPackages(inner) {
		imports = append(imports, knownImports[name])
	}
	for _, name := range givenImports {
		imports = append(imports, knownImports[name])
	}
	slices.Sort(imports)
	var src strings.Builder
	src.WriteString("package snippet\n\nimport (\n")
	for _, path := range slices.Compact(imports) {
		fmt.Fprintf(&src, "\t%q\n", path)
	}
	src.WriteString(")\n\n" + body + "\t}\n}\n")
	return src.String(), nil
}

// declared returns the names a statement of the fragment's own block
// declares: with := or var.
func declared(stmt ast.Stmt) []string {
	var names []string
	add := func(id *ast.Ident) {
		if id.Name != "_" {
			names = append(names, id.Name)
		}
	}
	switch s := stmt.(type) {
	case *ast.AssignStmt:
		if s.Tok == token.DEFINE {
			for _, e := range s.Lhs {
				if id, ok := e.(*ast.Ident); ok {
					add(id)
				}
			}
		}
	case *ast.DeclStmt:
		if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					add(id)
				}
			}
		}
	}
	return names
}

// usedPackages returns the known packages the fragment names in a
// selector (errors.Is), unless it declares a variable of that name.
func usedPackages(block *ast.BlockStmt) map[string]bool {
	local := map[string]bool{}
	ast.Inspect(block, func(n ast.Node) bool {
		if stmt, ok := n.(ast.Stmt); ok {
			for _, name := range declared(stmt) {
				local[name] = true
			}
		}
		return true
	})
	used := map[string]bool{}
	ast.Inspect(block, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && knownImports[id.Name] != "" && !local[id.Name] {
				used[id.Name] = true
			}
		}
		return true
	})
	return used
}
