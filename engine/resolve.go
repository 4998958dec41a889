package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"

	"github.com/containerd/errdefs"
	dockercontext "github.com/docker/cli/cli/context"
	"github.com/docker/cli/cli/context/store"
	"github.com/docker/cli/opts"
)

// The environment variables and names the docker CLI uses to choose its Engine.
const (
	envHost       = "DOCKER_HOST"
	envContext    = "DOCKER_CONTEXT"
	envConfig     = "DOCKER_CONFIG"
	envCertPath   = "DOCKER_CERT_PATH"
	envTLSVerify  = "DOCKER_TLS_VERIFY"
	envTLS        = "DOCKER_TLS"
	defaultName   = "default"
	configFile    = "config.json"
	contextsDir   = "contexts"
	dockerEPName  = "docker" // the docker endpoint of a context
	caFileName    = "ca.pem"
	certFileName  = "cert.pem"
	keyFileName   = "key.pem"
	configDirName = ".docker"
)

// Resolve returns the Engine endpoint the docker CLI would use with the environment getenv
// describes (os.LookupEnv when nil), in the CLI's order:
//
//  1. DOCKER_HOST, with TLS when DOCKER_TLS_VERIFY (verify) or DOCKER_TLS (no verify) is set,
//     using ca.pem, cert.pem and key.pem from DOCKER_CERT_PATH (default: the config dir);
//  2. else the context named by DOCKER_CONTEXT;
//  3. else currentContext in $DOCKER_CONFIG/config.json (default ~/.docker/config.json);
//  4. the context "default", or none, means DOCKER_HOST's default: unix:///var/run/docker.sock
//     (tcp://localhost:2376 when the TLS variables are set, as for the CLI).
//
// A named context is read from the CLI's context store ($DOCKER_CONFIG/contexts). An unknown
// context is an error that names it and the config file. Unlike the CLI, which warns and goes
// on with the default Engine, a config.json that cannot be parsed is an error.
func Resolve(getenv func(string) (string, bool)) (Endpoint, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	// The CLI treats a variable set to "" as unset.
	env := func(k string) string {
		v, _ := getenv(k)
		return v
	}
	cfgDir, err := configDir(env)
	if err != nil {
		return Endpoint{}, err
	}
	cfgPath := filepath.Join(cfgDir, configFile)

	name, source := defaultName, ""
	switch {
	case env(envHost) != "":
		// DOCKER_HOST selects the default context, whatever else is set.
	case env(envContext) != "":
		name, source = env(envContext), envContext
	default:
		current, err := currentContext(cfgPath)
		if err != nil {
			return Endpoint{}, err
		}
		if current != "" {
			name, source = current, "currentContext in "+cfgPath
		}
	}
	if name == defaultName {
		return defaultEndpoint(env, cfgDir)
	}
	return contextEndpoint(cfgDir, cfgPath, name, source)
}

// configDir is the docker CLI's config dir: DOCKER_CONFIG, else ~/.docker.
func configDir(env func(string) string) (string, error) {
	if d := env(envConfig); d != "" {
		return d, nil
	}
	home := env("HOME")
	if home == "" {
		// As the CLI's homedir.Get: HOME, else the user database.
		u, err := user.Current()
		if err != nil || u.HomeDir == "" {
			return "", fmt.Errorf("locate the docker config dir: neither %s nor HOME is set", envConfig)
		}
		home = u.HomeDir
	}
	return filepath.Join(home, configDirName), nil
}

// currentContext reads currentContext from the CLI's config.json; a missing file means none.
func currentContext(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read docker config: %w", err)
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("parse docker config %s: %w", path, err)
	}
	return cfg.CurrentContext, nil
}

// defaultEndpoint is the CLI's "default" context: DOCKER_HOST and the TLS variables.
func defaultEndpoint(env func(string) string, cfgDir string) (Endpoint, error) {
	verify := env(envTLSVerify) != ""
	useTLS := verify || env(envTLS) != ""
	host, err := opts.ParseHost(useTLS, env(envHost))
	if err != nil {
		return Endpoint{}, fmt.Errorf("%s: %w", envHost, err)
	}
	ep := Endpoint{Host: host}
	if !useTLS {
		return ep, nil
	}
	certDir := env(envCertPath)
	if certDir == "" {
		certDir = cfgDir
	}
	ep.TLSVerify = verify
	ep.SkipTLSVerify = !verify
	// As the CLI: the CA is always used (and must exist); the client certificate and key
	// only when their files exist.
	ep.TLSCA = filepath.Join(certDir, caFileName)
	if _, err := os.Stat(ep.TLSCA); err != nil {
		return Endpoint{}, fmt.Errorf("TLS is on (%s or %s is set) but the CA certificate is unusable (set %s to the folder holding %s, %s and %s): %w",
			envTLSVerify, envTLS, envCertPath, caFileName, certFileName, keyFileName, err)
	}
	if p := filepath.Join(certDir, certFileName); exists(p) {
		ep.TLSCert = p
	}
	if p := filepath.Join(certDir, keyFileName); exists(p) {
		ep.TLSKey = p
	}
	return ep, nil
}

// contextEndpoint reads a named context's docker endpoint from the CLI's context store.
func contextEndpoint(cfgDir, cfgPath, name, source string) (Endpoint, error) {
	st := store.New(filepath.Join(cfgDir, contextsDir), store.NewConfig(
		nil, // the context's own metadata (description…) is not needed
		store.EndpointTypeGetter(dockerEPName, func() any { return &dockercontext.EndpointMetaBase{} }),
	))
	meta, err := st.GetMetadata(name)
	if errdefs.IsNotFound(err) {
		return Endpoint{}, fmt.Errorf("docker context %q (from %s) does not exist in %s (config file %s); see `docker context ls`",
			name, source, filepath.Join(cfgDir, contextsDir), cfgPath)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q (from %s): %w", name, source, err)
	}
	// As the CLI's docker.EndpointFromContext, without the Engine client that
	// package brings.
	epMeta, ok := meta.Endpoints[dockerEPName].(dockercontext.EndpointMetaBase)
	if !ok {
		return Endpoint{}, fmt.Errorf("docker context %q (from %s): cannot find docker endpoint in context", name, source)
	}
	host := epMeta.Host
	if host == "" {
		// The CLI then leaves the client's default host in place.
		host, _ = opts.ParseHost(false, "")
	}
	ep := Endpoint{Context: name, Host: host, SkipTLSVerify: epMeta.SkipTLSVerify}

	files, err := st.ListTLSFiles(name)
	if err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q: %w", name, err)
	}
	tlsDir := filepath.Join(st.GetStorageInfo(name).TLSPath, dockerEPName)
	for _, f := range files[dockerEPName] {
		p := filepath.Join(tlsDir, f)
		switch f {
		case caFileName:
			ep.TLSCA = p
		case certFileName:
			ep.TLSCert = p
		case keyFileName:
			ep.TLSKey = p
		}
	}
	ep.TLSVerify = ep.HasTLSFiles() && !ep.SkipTLSVerify
	return ep, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
