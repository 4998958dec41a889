package manifest_test

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/presets"
)

// Presets (design.md §4): order, nesting, diamonds, cycles, lookup and shadowing.

// trace makes each preset append its name to env.TRACE-like evidence: every
// preset sets env.<NAME> = "1" and env.LAST = <name>, and the layers list tells
// the order.
func tracePreset(name string, refs ...string) string {
	var b strings.Builder
	if len(refs) > 0 {
		b.WriteString("presets = [\"" + strings.Join(refs, "\", \"") + "\"]\n")
	}
	b.WriteString("[env]\nLAST = \"" + name + "\"\n" + strings.ToUpper(name) + " = \"1\"\n")
	return b.String()
}

func layerNames(r *manifest.Resolved) []string {
	var out []string
	for _, l := range r.Layers {
		out = append(out, l.Name)
	}
	return out
}

func TestPresetOrder(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		layers []string
	}{
		{
			name: "list order, nested presets first",
			files: map[string]string{
				"a.toml":       tracePreset("a", "./b.toml"),
				"b.toml":       tracePreset("b"),
				"c.toml":       tracePreset("c"),
				"sandbox.toml": "presets = [\"./a.toml\", \"./c.toml\"]\n" + img,
			},
			layers: []string{"b.toml", "a.toml", "c.toml", "sandbox.toml"},
		},
		{
			name: "diamond applied once",
			files: map[string]string{
				"a.toml":       tracePreset("a", "./base.toml"),
				"b.toml":       tracePreset("b", "./base.toml"),
				"base.toml":    tracePreset("base"),
				"sandbox.toml": "presets = [\"./a.toml\", \"./b.toml\", \"./base.toml\"]\n" + img,
			},
			layers: []string{"base.toml", "a.toml", "b.toml", "sandbox.toml"},
		},
		{
			name: "the same file by two spellings is one preset",
			files: map[string]string{
				"sub/a.toml":   tracePreset("a", "../base.toml"),
				"base.toml":    tracePreset("base"),
				"sandbox.toml": "presets = [\"sub/a.toml\", \"./base.toml\", \"base.toml\"]\n" + img,
			},
			layers: []string{"base.toml", "sub/a.toml", "sandbox.toml"},
		},
		{
			name: "sandbox.local.toml adds presets below sandbox.toml",
			files: map[string]string{
				"a.toml":             tracePreset("a"),
				"l.toml":             tracePreset("l", "./a.toml"),
				"sandbox.toml":       "presets = [\"./a.toml\"]\n" + img + "[env]\nLAST = \"main\"\n",
				"sandbox.local.toml": "presets = [\"./l.toml\"]\n",
			},
			layers: []string{"a.toml", "l.toml", "sandbox.toml", "sandbox.local.toml"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := load(t, tt.files)
			if got := layerNames(r); !reflect.DeepEqual(got, tt.layers) {
				t.Errorf("layers = %q, want %q", got, tt.layers)
			}
			// The highest preset layer's LAST wins unless sandbox.toml sets it.
			want := strings.TrimSuffix(tt.layers[len(tt.layers)-2], ".toml")
			want = want[strings.LastIndex(want, "/")+1:]
			if strings.Contains(tt.files["sandbox.toml"], "LAST") {
				want = "main"
			}
			if r.Env["LAST"] != want {
				t.Errorf("env.LAST = %q, want %q (from the highest layer)", r.Env["LAST"], want)
			}
		})
	}
}

func TestPresetLocalLayerOrderOverMain(t *testing.T) {
	// A preset named by sandbox.local.toml is still below sandbox.toml: it cannot
	// override what sandbox.toml sets, but it adds what sandbox.toml lacks.
	r := load(t, map[string]string{
		"l.toml":             "[env]\nA = \"preset\"\nB = \"preset\"\n",
		"sandbox.toml":       img + "[env]\nA = \"main\"\n",
		"sandbox.local.toml": "presets = [\"./l.toml\"]\n",
	})
	if r.Env["A"] != "main" || r.Env["B"] != "preset" {
		t.Errorf("env = %v, want A=main (sandbox.toml over its local preset), B=preset", r.Env)
	}
}

func TestPresetErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		user  map[string]string
		want  string
	}{
		{
			name:  "unknown name",
			files: map[string]string{"sandbox.toml": "# x\npresets = [\"redis\", \"mongo\"]\n" + img},
			want:  `sandbox.toml:2: presets: unknown preset "mongo" (not a user preset in USER, not a built-in: docker, go, mariadb, node, postgres, python, redis)`,
		},
		{
			name:  "unknown path",
			files: map[string]string{"sandbox.toml": "presets = [\"./team.toml\"]\n" + img},
			want:  `sandbox.toml:1: presets: unknown preset "./team.toml": PROJ/team.toml does not exist`,
		},
		{
			name:  "unknown name in a nested preset names that preset's file",
			files: map[string]string{"sandbox.toml": "presets = [\"./a.toml\"]\n" + img, "a.toml": "\npresets = [\"nope\"]\n"},
			want:  `a.toml:2: presets: unknown preset "nope" (not a user preset in USER, not a built-in: docker, go, mariadb, node, postgres, python, redis)`,
		},
		{
			name:  "invalid name",
			files: map[string]string{"sandbox.toml": "presets = [\"red is\"]\n" + img},
			want:  `sandbox.toml:1: presets: invalid preset name "red is" (use letters, digits, - and _, or a path)`,
		},
		{
			name:  "empty name",
			files: map[string]string{"sandbox.toml": "presets = [\"\"]\n" + img},
			want:  `sandbox.toml:1: presets: empty preset name`,
		},
		{
			name: "cycle of user presets",
			user: map[string]string{"a": "presets = [\"b\"]\n", "b": "presets = [\"a\"]\n"},
			files: map[string]string{
				"sandbox.toml": "presets = [\"a\"]\n" + img,
			},
			want: `../user/b.toml:1: presets: preset cycle: a -> b -> a`,
		},
		{
			name: "cycle of path presets",
			files: map[string]string{
				"sandbox.toml": "presets = [\"./a.toml\"]\n" + img,
				"a.toml":       "presets = [\"./b.toml\"]\n",
				"b.toml":       "presets = [\"./c.toml\"]\n",
				"c.toml":       "\npresets = [\"./a.toml\"]\n",
			},
			want: `c.toml:2: presets: preset cycle: ./a.toml -> ./b.toml -> ./c.toml -> ./a.toml`,
		},
		{
			name: "a preset that names itself",
			files: map[string]string{
				"sandbox.toml": "presets = [\"./a.toml\"]\n" + img,
				"a.toml":       "presets = [\"a.toml\"]\n",
			},
			want: `a.toml:1: presets: preset cycle: ./a.toml -> a.toml`,
		},
		{
			name: "a preset that names sandbox.toml",
			files: map[string]string{
				"sandbox.toml": "presets = [\"./a.toml\"]\n" + img,
				"a.toml":       "presets = [\"./sandbox.toml\"]\n",
			},
			want: `a.toml:1: presets: preset cycle: sandbox.toml -> ./a.toml -> ./sandbox.toml`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProject(t, tt.files)
			for name, content := range tt.user {
				p.write(map[string]string{"../user/" + name + ".toml": content})
			}
			want := strings.NewReplacer("USER", p.userDir, "PROJ", p.dir).Replace(tt.want)
			if got := p.loadErr(); got != want {
				t.Errorf("error:\n\tgot  %s\n\twant %s", got, want)
			}
		})
	}
}

func TestPresetLookup(t *testing.T) {
	builtin := fstest.MapFS{
		"cache.toml":      {Data: []byte("[env]\nFROM = \"builtin\"\nBUILTIN_ONLY = \"1\"\n")},
		"base.toml":       {Data: []byte("[env]\nBASE = \"builtin\"\n")},
		"stack.toml":      {Data: []byte("presets = [\"base\", \"./extra/more.toml\"]\n[env]\nSTACK = \"1\"\n")},
		"extra/more.toml": {Data: []byte("[env]\nMORE = \"builtin-path\"\n")},
	}
	t.Run("user preset shadows a built-in of the same name", func(t *testing.T) {
		p := newProject(t, map[string]string{
			"sandbox.toml":        "presets = [\"cache\"]\n" + img,
			"../user/cache.toml":  "[env]\nFROM = \"user\"\n",
			"../user/unused.toml": "[env]\nUNUSED = \"1\"\n",
		})
		p.builtin = builtin
		r := p.mustLoad()
		if r.Env["FROM"] != "user" || r.Env["BUILTIN_ONLY"] != "" || r.Env["UNUSED"] != "" {
			t.Errorf("env = %v, want only the user preset's FROM=user", r.Env)
		}
		if got := layerNames(r); !reflect.DeepEqual(got, []string{"../user/cache.toml", "sandbox.toml"}) {
			t.Errorf("layers = %q", got)
		}
	})
	t.Run("built-in preset when no user preset has the name", func(t *testing.T) {
		p := newProject(t, map[string]string{"sandbox.toml": "presets = [\"cache\"]\n" + img})
		p.builtin = builtin
		r := p.mustLoad()
		if r.Env["FROM"] != "builtin" {
			t.Errorf("env = %v, want FROM=builtin", r.Env)
		}
		if len(r.Layers) != 2 || r.Layers[0] != (manifest.LayerInfo{Name: "preset cache", Builtin: true}) {
			t.Errorf("layers = %+v, want the built-in first", r.Layers)
		}
	})
	t.Run("no user presets dir", func(t *testing.T) {
		p := newProject(t, map[string]string{"sandbox.toml": "presets = [\"cache\"]\n" + img, "../user/cache.toml": "[env]\nFROM = \"user\"\n"})
		p.builtin = builtin
		l := p.loader()
		l.UserPresetsDir = ""
		r, err := l.Load(p.dir + "/sandbox.toml")
		if err != nil {
			t.Fatal(err)
		}
		if r.Env["FROM"] != "builtin" {
			t.Errorf("env = %v, want FROM=builtin", r.Env)
		}
	})
	t.Run("a built-in's presets: names and paths inside the built-in set", func(t *testing.T) {
		p := newProject(t, map[string]string{
			"sandbox.toml": "presets = [\"stack\"]\n" + img,
			// A file of that relative path in the project is not what the built-in means.
			"extra/more.toml": "[env]\nMORE = \"project\"\n",
		})
		p.builtin = builtin
		r := p.mustLoad()
		if r.Env["STACK"] != "1" || r.Env["BASE"] != "builtin" || r.Env["MORE"] != "builtin-path" {
			t.Errorf("env = %v, want STACK, BASE and MORE from the built-ins", r.Env)
		}
	})
	t.Run("path presets relative to the file that names them", func(t *testing.T) {
		p := newProject(t, map[string]string{
			"sandbox.toml":             "presets = [\"presets/team.toml\"]\n" + img,
			"presets/team.toml":        "presets = [\"./lang/go.toml\", \"../shared.toml\"]\n[env]\nTEAM = \"1\"\n",
			"presets/lang/go.toml":     "presets = [\"common.toml\"]\n[env]\nLANG = \"go\"\n",
			"presets/lang/common.toml": "[env]\nCOMMON = \"1\"\n",
			"shared.toml":              "[env]\nSHARED = \"1\"\n",
			// Decoys at the paths a wrong base directory would find.
			"lang/go.toml": "[env]\nLANG = \"wrong\"\n",
			"common.toml":  "[env]\nCOMMON = \"wrong\"\n",
		})
		r := p.mustLoad()
		want := manifest.Env{"TEAM": "1", "LANG": "go", "COMMON": "1", "SHARED": "1"}
		if !reflect.DeepEqual(r.Env, want) {
			t.Errorf("env = %v, want %v", r.Env, want)
		}
		wantLayers := []string{"presets/lang/common.toml", "presets/lang/go.toml", "shared.toml", "presets/team.toml", "sandbox.toml"}
		if got := layerNames(r); !reflect.DeepEqual(got, wantLayers) {
			t.Errorf("layers = %q, want %q", got, wantLayers)
		}
	})
	t.Run("a user preset's path presets are relative to the user presets dir", func(t *testing.T) {
		p := newProject(t, map[string]string{
			"sandbox.toml":         "presets = [\"mine\"]\n" + img,
			"../user/mine.toml":    "presets = [\"./parts/x.toml\"]\n",
			"../user/parts/x.toml": "[env]\nX = \"user-part\"\n",
		})
		if got := p.mustLoad().Env["X"]; got != "user-part" {
			t.Errorf("env.X = %q", got)
		}
	})
	t.Run("absolute path preset", func(t *testing.T) {
		p := newProject(t, map[string]string{"../elsewhere/abs.toml": "[env]\nABS = \"1\"\n"})
		p.write(map[string]string{"sandbox.toml": "presets = [\"" + p.root + "/elsewhere/abs.toml\"]\n" + img})
		if got := p.mustLoad().Env["ABS"]; got != "1" {
			t.Errorf("env.ABS = %q", got)
		}
	})
}

func TestBuiltinPresets(t *testing.T) {
	names := manifest.BuiltinNames(presets.FS)
	for _, want := range []string{"redis", "postgres", "mariadb", "docker", "go", "node", "python"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("built-in preset %q is missing; have %q", want, names)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			data, err := fs.ReadFile(presets.FS, name+".toml")
			if err != nil {
				t.Fatal(err)
			}
			if presets.Description(data) == "" {
				t.Errorf("%s.toml has no one-line description comment", name)
			}
			r := load(t, map[string]string{"sandbox.toml": "presets = [\"" + name + "\"]\n" + img})
			if len(r.Layers) != 2 || !r.Layers[0].Builtin || r.Layers[0].Name != "preset "+name {
				t.Errorf("layers = %+v", r.Layers)
			}
			for _, out := range []func() ([]byte, error){r.TOML, r.JSON} {
				if _, err := out(); err != nil {
					t.Error(err)
				}
			}
			for _, d := range r.Daemons {
				if d.Ready == nil {
					t.Errorf("a built-in daemon without a ready check: %+v", d)
				}
			}
		})
	}
	// All of them at once merge without conflicts.
	load(t, map[string]string{"sandbox.toml": "presets = [\"" + strings.Join(names, "\", \"") + "\"]\n" + img})

	t.Run("docker is privileged, dockerd unhardened", func(t *testing.T) {
		r := load(t, map[string]string{"sandbox.toml": "presets = [\"docker\"]\n" + img})
		if !r.Sandbox.Privileged || r.Daemons["dockerd"].Harden {
			t.Errorf("sandbox.privileged = %v, daemons.dockerd.harden = %v", r.Sandbox.Privileged, r.Daemons["dockerd"].Harden)
		}
	})
	t.Run("a built-in daemon can be turned off", func(t *testing.T) {
		r := load(t, map[string]string{"sandbox.toml": "presets = [\"redis\"]\n" + img + "[daemons.redis]\nenabled = false\n"})
		if _, ok := r.Daemons["redis"]; ok {
			t.Error("daemons.redis is still there")
		}
		if r.Env["REDIS_URL"] == "" {
			t.Error("the rest of the preset is gone too")
		}
	})
}
