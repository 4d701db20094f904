package synth_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"testing"
)

// TestAliasDocs: go doc synth.Options (and Stats) shows no fields, the
// types being aliases of internal/config's, so their docs list them;
// every field of the type must be in the list, and nothing else.
func TestAliasDocs(t *testing.T) {
	fset := token.NewFileSet()
	fields := map[string][]string{} // type: field names, from internal/config
	cfg, err := parser.ParseDir(fset, "../internal/config", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range cfg["config"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok && (ts.Name.Name == "Options" || ts.Name.Name == "Stats") {
					for _, fl := range st.Fields.List {
						for _, nm := range fl.Names {
							fields[ts.Name.Name] = append(fields[ts.Name.Name], nm.Name)
						}
					}
				}
			}
			return true
		})
	}
	f, err := parser.ParseFile(fset, "options.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	item := regexp.MustCompile(`(?m)^  - (\w+)`)
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		name := gd.Specs[0].(*ast.TypeSpec).Name.Name
		want, ok := fields[name]
		if !ok {
			continue
		}
		delete(fields, name)
		var got []string
		for _, m := range item.FindAllStringSubmatch(gd.Doc.Text(), -1) {
			got = append(got, m[1])
		}
		if len(got) != len(want) {
			t.Errorf("synth.%s's doc lists %d fields %v, internal/config's has %d %v", name, len(got), got, len(want), want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("synth.%s's doc lists %s where the type has %s", name, got[i], want[i])
			}
		}
	}
	for name := range fields {
		t.Errorf("synth.%s: no doc found", name)
	}
}
