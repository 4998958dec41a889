package userconfig

import (
	"strings"
	"testing"
)

// TestOutputSizes: artifacts.output_max and artifacts.exec_output_max take a
// size with a unit, have their defaults (1 GiB, 64 MiB), and refuse what is
// not a size, zero, negative or over 1 PiB with an error naming the file, the
// line and the key.
func TestOutputSizes(t *testing.T) {
	t.Parallel()
	c, err := Parse("config.toml", []byte("[artifacts]\n"), "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	if c.Artifacts.OutputMax != 1<<30 || c.Artifacts.ExecOutputMax != 64<<20 {
		t.Errorf("defaults: output_max %d, exec_output_max %d", c.Artifacts.OutputMax, c.Artifacts.ExecOutputMax)
	}
	if d := Default(); d.Artifacts.OutputMax != DefaultOutputMax || d.Artifacts.ExecOutputMax != DefaultExecOutputMax {
		t.Errorf("Default(): %+v", d.Artifacts)
	}
	for src, want := range map[string][2]int64{
		"output_max = \"2GiB\"\nexec_output_max = \"1m\"\n":    {2 << 30, 1 << 20},
		"output_max = \"500k\"\nexec_output_max = \"100\"\n":   {500 << 10, 100},
		"output_max = \"1.5 GB\"\nexec_output_max = \"64KiB\"": {3 << 29, 64 << 10},
		"output_max = \"1p\"\n":                                {1 << 50, 64 << 20},
	} {
		c, err := Parse("config.toml", []byte("[artifacts]\n"+src), "/home/u")
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if got := [2]int64{c.Artifacts.OutputMax, c.Artifacts.ExecOutputMax}; got != want {
			t.Errorf("%q: got %v, want %v", src, got, want)
		}
	}
	for src, want := range map[string]string{
		"output_max = \"lots\"":     `config.toml:2: artifacts.output_max: invalid size "lots"`,
		"output_max = \"0\"":        `config.toml:2: artifacts.output_max: size "0" must be at least 1 byte`,
		"output_max = \"-1m\"":      `artifacts.output_max: invalid size "-1m"`,
		"output_max = \"\"":         `artifacts.output_max: invalid size ""`,
		"exec_output_max = \"2p\"":  `config.toml:2: artifacts.exec_output_max: size "2p" is above the maximum of 1 PiB`,
		"exec_output_max = 1024":    `config.toml:2: artifacts.exec_output_max: wrong type: expected a string, got an integer`,
		"exec_output_max = \"1x\"":  `artifacts.exec_output_max: invalid size "1x"`,
		"exec_output_maxx = \"1m\"": `config.toml:2: artifacts.exec_output_maxx: unknown key`,
	} {
		_, err := Parse("config.toml", []byte("[artifacts]\n"+src+"\n"), "/home/u")
		if err == nil || !strings.Contains(err.Error(), want) || !IsConfigError(err) {
			t.Errorf("%q: got %v, want a config error containing %q", src, err, want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1.0 KiB", 64 << 20: "64.0 MiB", 1 << 30: "1.0 GiB", 3 << 29: "1.5 GiB", 1 << 50: "1.0 PiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
