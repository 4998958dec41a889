package manifest

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The schema and the key reference in docs/ are generated from Fields; these tests
// keep the committed copies in sync. Run with UPDATE_DOCS=1 to rewrite them.

const (
	fieldsBegin = "<!-- fields:begin (generated from manifest/fields.go; UPDATE_DOCS=1 go test ./manifest) -->\n"
	fieldsEnd   = "<!-- fields:end -->"
)

func TestSchemaFileInSync(t *testing.T) {
	const file = "../docs/sandbox.schema.json"
	want := Schema()
	if os.Getenv("UPDATE_DOCS") == "1" {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is out of date with `airlock schema`; run UPDATE_DOCS=1 go test ./manifest", file)
	}
}

func TestManifestDocInSync(t *testing.T) {
	const file = "../docs/manifest.md"
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, fieldsBegin), strings.Index(s, fieldsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated key reference markers", file)
	}
	updated := s[:i] + fieldsBegin + FieldsMarkdown() + s[j:]
	if os.Getenv("UPDATE_DOCS") == "1" && updated != s {
		if err := os.WriteFile(file, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		s = updated
	}
	if updated != s {
		t.Fatalf("the key reference in %s is out of date; run UPDATE_DOCS=1 go test ./manifest", file)
	}
}

// TestFieldsCoverModel checks that Fields documents every key of the model and
// nothing else.
func TestFieldsCoverModel(t *testing.T) {
	var model []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key := strings.Split(f.Tag.Get("toml"), ",")[0]
			if prefix != "" {
				key = prefix + "." + key
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct:
				model = append(model, key)
				walk(key, ft)
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				model = append(model, key+".<name>")
				walk(key+".<name>", ft.Elem())
			default:
				model = append(model, key)
			}
		}
	}
	walk("", reflect.TypeOf(Manifest{}))
	var documented []string
	for _, f := range Fields {
		documented = append(documented, f.Key)
	}
	sort.Strings(model)
	sort.Strings(documented)
	if !reflect.DeepEqual(model, documented) {
		t.Fatalf("Fields and the model differ:\nmodel:      %v\ndocumented: %v", model, documented)
	}
}
