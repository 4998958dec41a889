package manifest_test

import (
	"slices"

	"github.com/airlock-dev/airlock/manifest"
	"reflect"
	"strings"
	"testing"
)

// Tool aliases: the -cache names of the first release resolve to the canonical
// names, count once beside them, and config --layers says which alias was used.
func TestToolAliasesResolveToCanonicalNames(t *testing.T) {
	r := load(t, map[string]string{
		"base.toml":    "tools = [\"uv-cache\", \"git\"]\n",
		"sandbox.toml": "presets = [\"./base.toml\"]\ntools = [\"uv\", \"npm-cache\", \"apt\"]\n" + img,
	})
	if want := []string{"uv", "git", "npm", "apt"}; !reflect.DeepEqual(r.Tools, want) {
		t.Errorf("tools = %q, want %q", r.Tools, want)
	}
	for _, s := range r.Settings() {
		if s.Key != "tools" {
			continue
		}
		if s.Value != `["uv", "git", "npm", "apt"]` {
			t.Errorf("tools value = %s", s.Value)
		}
		for _, want := range []string{"npm-cache: alias of npm", "uv-cache: alias of uv"} {
			if !strings.Contains(s.Layer, want) {
				t.Errorf("tools layer = %q, want it to mention %q", s.Layer, want)
			}
		}
		return
	}
	t.Fatal("no tools setting")
}

func TestToolWithoutAliasHasNoAnnotation(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": "tools = [\"go\", \"claude\"]\n" + img})
	for _, s := range r.Settings() {
		if s.Key == "tools" && strings.Contains(s.Layer, "alias") {
			t.Errorf("tools layer = %q mentions an alias", s.Layer)
		}
	}
}

// The schema's list of tool names holds every alias ToolAliases knows, so an
// editor checking against the schema accepts what airlock accepts.
func TestToolAliasesAreInTheSchema(t *testing.T) {
	for _, f := range manifest.Fields {
		if f.Key != "tools" {
			continue
		}
		for alias, canonical := range manifest.ToolAliases {
			if !slices.Contains(f.Enum, alias) || !slices.Contains(f.Enum, canonical) {
				t.Errorf("tools enum %q lacks %s or %s", f.Enum, alias, canonical)
			}
		}
		return
	}
	t.Fatal("no tools field")
}
