//go:build ignore

// funclen prints every function of the given Go files that is longer than -max lines, counted from
// the line of its `func` keyword to the line of its closing brace, both included. It exits 1 when it
// printed any, 2 when it cannot parse a file. .ci/complexity.sh builds it by its file name; the build
// tag keeps it out of `go build ./...` and `go vet ./...`.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
)

func main() {
	maxLines := flag.Int("max", 80, "the most lines a function may have")
	flag.Parse()
	fset := token.NewFileSet()
	long := 0
	for _, path := range flag.Args() {
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			// Pos is the `func` keyword (a doc comment is not part of it); End is just past the brace.
			first := fset.Position(fn.Pos())
			last := fset.Position(fn.End())
			lines := last.Line - first.Line + 1
			if lines > *maxLines {
				fmt.Printf("%d lines: %s %s:%d\n", lines, funcName(fn), first.Filename, first.Line)
				long++
			}
		}
	}
	if long > 0 {
		os.Exit(1)
	}
}

// funcName is the function's name as gocognit prints it: (*T).name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	return "(" + typeName(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}

// typeName is a receiver's type as written: T, *T, T[K] or *T[K] print as T or *T.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
