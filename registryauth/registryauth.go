// Package registryauth finds the credentials for an image reference as the docker CLI finds them.
//
// Library choice: the docker CLI's own config package, github.com/docker/cli/cli/config
// (the release engine uses), which reads config.json and runs credential helpers through
// github.com/docker/docker-credential-helpers/client, so a `docker login` is honoured exactly
// as `docker pull` honours it: credHelpers[host], else credsStore (or, when config.json holds
// no auths, the platform's default helper if installed), else the base64 user:password of
// auths[host]; $DOCKER_AUTH_CONFIG, when set, comes first. Credentials are read for one pull
// and handed to the Engine; they are never stored, logged or put in an error.
package registryauth

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/docker/cli/cli/config/credentials"
	"github.com/docker/cli/cli/config/types"
	"github.com/docker/docker/api/types/registry"
)

// DockerHub is the domain of Docker Hub images ("busybox", "library/busybox").
const DockerHub = "docker.io"

// hubKey is the config.json key of Docker Hub credentials, as `docker login` writes it.
const hubKey = "https://index.docker.io/v1/"

// Credentials are what a pull of one image sends to its registry.
//
// Print them freely: String shows where they came from, never the secret.
type Credentials struct {
	// Host is the registry's domain ("registry.example.com", "127.0.0.1:5000"; DockerHub for Hub).
	Host string
	// Source says where the credentials came from, for messages: "" when there are
	// none, else the config file or "credential helper docker-credential-NAME".
	Source string
	// Warning explains why no credentials were found when a lookup failed (a
	// credential helper that is missing or failed); "" otherwise. Never a secret.
	Warning string
	// Config is the config.json that was read (it may not exist).
	Config string
	// Helper is the credential helper consulted ("docker-credential-NAME"), "" for none.
	Helper string

	header string
	auth   registry.AuthConfig
}

// AuthConfig is what the credentials send, for passing them on to a process
// that pulls for this one (the control daemon): never print it.
func (c Credentials) AuthConfig() registry.AuthConfig { return c.auth }

// Given returns the credentials for image that another process found (a client
// of the control daemon, with For) and passed on: auth is what to send; source
// (where they came from), where (where they were looked for: Where's text) and
// warning (why none were found) are for messages. Credentials given without a
// source are said to come from the request.
func Given(image string, auth registry.AuthConfig, source, where, warning string) (Credentials, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return Credentials{}, fmt.Errorf("cannot parse image reference %q: %w", image, err)
	}
	c := Credentials{Host: reference.Domain(named), Source: source, Config: where, Warning: warning, auth: auth}
	if c.Source == "" && (auth.Username != "" || auth.Password != "" || auth.IdentityToken != "" || auth.RegistryToken != "" || auth.Auth != "") {
		c.Source = "the request"
	}
	if c.Config == "" {
		c.Config = "the request"
	}
	if c.header, err = registry.EncodeAuthConfig(auth); err != nil {
		return Credentials{Host: c.Host}, errors.New("cannot encode the registry credentials")
	}
	return c, nil
}

// Header is the X-Registry-Auth value for the Engine's pull (ImagePullOptions.RegistryAuth).
func (c Credentials) Header() string { return c.header }

// Found says whether there are credentials to send.
func (c Credentials) Found() bool { return c.Source != "" }

// Login is the command that stores credentials for the registry.
func (c Credentials) Login() string {
	if c.Host == DockerHub || c.Host == "" {
		return "docker login"
	}
	return "docker login " + c.Host
}

// Where says where credentials were looked for: the helper or the config file.
func (c Credentials) Where() string {
	if c.Helper != "" {
		return "credential helper " + c.Helper
	}
	return c.Config
}

func (c Credentials) String() string {
	if !c.Found() {
		return "no credentials for " + c.Host
	}
	return "credentials for " + c.Host + " from " + c.Source
}

// GoString keeps %#v from printing the header.
func (c Credentials) GoString() string { return c.String() }

// For returns the credentials for image (a reference as docker pull takes it), read from
// the docker CLI's config dir of getenv's environment ($DOCKER_CONFIG, else ~/.docker).
// A config.json that cannot be parsed is an error; a credential helper that fails is not
// (docker pull goes on without credentials too): it is reported in Warning. Credential
// helpers run with this process's environment, found on its PATH, as the docker CLI runs them.
func For(image string, getenv func(string) (string, bool)) (Credentials, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return Credentials{}, fmt.Errorf("cannot parse image reference %q: %w", image, err)
	}
	c := Credentials{Host: reference.Domain(named)}
	key := c.Host
	if key == DockerHub {
		key = hubKey
	}
	dir, err := configDir(getenv)
	if err != nil {
		return c, err
	}
	c.Config = filepath.Join(dir, config.ConfigFileName)
	cfg, err := config.Load(dir)
	if err != nil {
		return c, fmt.Errorf("cannot read the docker CLI's credentials: %w", err)
	}
	// As config.LoadDefaultConfigFile, which docker pull uses.
	if !cfg.ContainsAuth() {
		cfg.CredentialsStore = credentials.DetectDefaultStore(cfg.CredentialsStore)
	}
	helper := helperFor(cfg, key)
	if helper != "" {
		c.Helper = "docker-credential-" + helper
	}
	auth, err := cfg.GetAuthConfig(key)
	if err != nil {
		c.Warning = fmt.Sprintf("credential helper %s failed: %s", c.Helper, scrub(err.Error()))
		auth = types.AuthConfig{}
	}
	if auth.Username != "" || auth.Password != "" || auth.IdentityToken != "" || auth.RegistryToken != "" || auth.Auth != "" {
		c.Source = cfg.Filename
		if helper != "" && err == nil {
			c.Source = "credential helper " + c.Helper
		}
		if os.Getenv(configfile.DockerEnvConfigKey) != "" {
			c.Source = "$" + configfile.DockerEnvConfigKey + " or " + c.Source
		}
	}
	// As command.RetrieveAuthTokenFromImage: every field the CLI sends.
	c.auth = registry.AuthConfig{
		Username:      auth.Username,
		Password:      auth.Password,
		ServerAddress: auth.ServerAddress,
		Auth:          auth.Auth,
		IdentityToken: auth.IdentityToken,
		RegistryToken: auth.RegistryToken,
	}
	c.header, err = registry.EncodeAuthConfig(c.auth)
	if err != nil {
		return Credentials{Host: c.Host}, errors.New("cannot encode the registry credentials")
	}
	return c, nil
}

// helperFor is the credential helper the config names for key (configfile's rule).
func helperFor(cfg *configfile.ConfigFile, key string) string {
	if h, ok := cfg.CredentialHelpers[key]; ok {
		return h
	}
	return cfg.CredentialsStore
}

// scrub keeps a helper's error from carrying what looks like a credential: the
// client library quotes the helper's output, which a broken helper may fill with
// the JSON it should have printed on success.
func scrub(msg string) string {
	if strings.Contains(msg, `"Secret"`) || strings.Contains(msg, `"Username"`) {
		if i := strings.Index(msg, "out:"); i >= 0 {
			return strings.TrimSpace(msg[:i]) + " (output withheld)"
		}
		return "(output withheld)"
	}
	return strings.TrimSuffix(msg, ", out: ``")
}

// configDir is the docker CLI's config dir: $DOCKER_CONFIG, else ~/.docker.
func configDir(getenv func(string) (string, bool)) (string, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	if d, _ := getenv(config.EnvOverrideConfigDir); d != "" {
		return d, nil
	}
	home, _ := getenv("HOME")
	if home == "" {
		u, err := user.Current()
		if err != nil || u.HomeDir == "" {
			return "", fmt.Errorf("cannot locate the docker config dir: neither %s nor HOME is set", config.EnvOverrideConfigDir)
		}
		home = u.HomeDir
	}
	return filepath.Join(home, ".docker"), nil
}

// All returns every credential the docker CLI's config holds, keyed by registry, as
// `docker build` sends them with a build (the Engine picks the ones the Dockerfile's
// FROM lines need). Helpers that fail are skipped, as they are there.
func All(getenv func(string) (string, bool)) (map[string]registry.AuthConfig, error) {
	dir, err := configDir(getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read the docker CLI's credentials: %w", err)
	}
	if !cfg.ContainsAuth() {
		cfg.CredentialsStore = credentials.DetectDefaultStore(cfg.CredentialsStore)
	}
	creds, err := cfg.GetAllCredentials()
	if err != nil {
		return nil, fmt.Errorf("cannot read the docker CLI's credentials: %s", scrub(err.Error()))
	}
	out := make(map[string]registry.AuthConfig, len(creds))
	for k, a := range creds {
		out[k] = registry.AuthConfig{
			Username:      a.Username,
			Password:      a.Password,
			ServerAddress: a.ServerAddress,
			Auth:          a.Auth,
			IdentityToken: a.IdentityToken,
			RegistryToken: a.RegistryToken,
		}
	}
	return out, nil
}
