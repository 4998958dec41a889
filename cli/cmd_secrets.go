package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/secrets"
	"github.com/airlock-dev/airlock/userconfig"
)

func init() { addCommand(newSecretsCommand) }

// maxSecretSize bounds a value read from standard input.
const maxSecretSize = 1 << 20

func newSecretsCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage the secrets in your vault (set, ls, rm)",
		Long: "The vault holds named secrets that sandbox.toml can reference as ${NAME} when the host\n" +
			"environment lacks NAME. Values are read from a hidden prompt or standard input, never\n" +
			"from the command line, and are never printed. See docs/secrets.md.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return withCode(ExitUsage, fmt.Errorf("unknown command %q for \"airlock secrets\" (set, ls or rm)", args[0]))
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newSecretsSetCommand(a), newSecretsLsCommand(a), newSecretsRmCommand(a))
	return cmd
}

func newSecretsSetCommand(a *app) *cobra.Command {
	var fromStdin, yes bool
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Store a secret (value from a hidden prompt, or standard input with --stdin)",
		Long: "Store a secret under NAME ([A-Z_][A-Z0-9_]*). On a terminal the value is asked for twice\n" +
			"without echo; with --stdin it is read from standard input, one trailing newline removed.\n" +
			"The value is never taken from the command line. An empty value is refused, and so is one\n" +
			"shorter than 4 bytes: airlock could not mask it in its output and logs.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.secretsSet(args[0], fromStdin, yes)
		},
	}
	cmd.Flags().BoolVar(&fromStdin, "stdin", false, "read the value from standard input (not a terminal)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "with [vault] storage = \"file\": store the value unencrypted without asking")
	return cmd
}

func newSecretsLsCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the secrets: names, previews of the values, when they were saved",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return a.secretsList() },
	}
}

func newSecretsRmCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove"},
		Short:   "Remove a secret",
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return a.secretsRemove(args[0]) },
	}
}

// vaultUserConfig reads config.toml for its [vault] storage.
func (a *app) vaultUserConfig(p *paths.Paths) (*userconfig.Config, error) {
	home, _ := a.getenv("HOME")
	return userconfig.LoadWithHome(p.UserConfig(), home)
}

// vaultOptions are the vault's location, backend and passphrase source. The
// passphrase comes from AIRLOCK_VAULT_PASSPHRASE, else a prompt on /dev/tty —
// but only when airlock runs as a real process (stdin is a file), so in-process
// tests never reach for the developer's terminal.
func (a *app) vaultOptions(p *paths.Paths, c *userconfig.Config) (secrets.Options, error) {
	s, err := secrets.ParseStorage(c.Vault.Storage)
	if err != nil {
		return secrets.Options{}, err
	}
	_, real := a.stdin.(*os.File)
	return secrets.Options{
		Storage:    s,
		Prefix:     p.Vault(),
		Passphrase: secrets.PassphraseSource(a.getenv, real),
	}, nil
}

// vaultLookup is the manifest loader's vault: opened on the first ${NAME} the
// host environment lacks, never before.
func (a *app) vaultLookup(p *paths.Paths) *secrets.LazyLookup {
	return secrets.Lazy(func() (*secrets.Vault, error) {
		c, err := a.vaultUserConfig(p)
		if err != nil {
			return nil, err
		}
		o, err := a.vaultOptions(p, c)
		if err != nil {
			return nil, err
		}
		return secrets.Open(o)
	})
}

// openVaultForCommand opens the vault for a secrets command: user config
// problems exit 2, a disabled vault and vault problems exit 1.
func (a *app) openVaultForCommand() (*secrets.Vault, *userconfig.Config, error) {
	p, err := a.paths()
	if err != nil {
		return nil, nil, err
	}
	c, err := a.vaultUserConfig(p)
	if err != nil {
		if userconfig.IsConfigError(err) {
			return nil, nil, configError(err)
		}
		return nil, nil, withCode(ExitUsage, err)
	}
	if c.Vault.Storage == string(secrets.Disabled) {
		return nil, c, withCode(ExitFailure, fmt.Errorf("the vault is disabled: [vault] storage = \"disabled\" in %s.\n"+
			"To use it, set storage = \"encrypted-file\" there (or delete the line); sandbox.toml can still take\n"+
			"${NAME} values from the host environment without a vault", c.File))
	}
	o, err := a.vaultOptions(p, c)
	if err != nil {
		return nil, c, configError(err)
	}
	v, err := secrets.Open(o)
	if err != nil {
		return nil, c, withCode(ExitFailure, err)
	}
	return v, c, nil
}

func checkSecretName(name string) error {
	if !secrets.ValidName(name) {
		return withCode(ExitUsage, fmt.Errorf("invalid secret name %q: use upper case letters, digits and _, not starting with a digit ([A-Z_][A-Z0-9_]*)", name))
	}
	return nil
}

func (a *app) secretsSet(name string, fromStdin, yes bool) error {
	if err := checkSecretName(name); err != nil {
		return err
	}
	interactive := isTerminal(a.stdin)
	switch {
	case fromStdin && interactive:
		return withCode(ExitUsage, errors.New("--stdin reads the value from standard input, which is a terminal here: drop --stdin to be asked for it without echo"))
	case !fromStdin && !interactive:
		return withCode(ExitUsage, errors.New("standard input is not a terminal: pass --stdin to read the value from it (a value is never taken from the command line)"))
	}
	v, _, err := a.openVaultForCommand()
	if err != nil {
		return err
	}
	if v.Storage() == secrets.PlainFile && !yes {
		fmt.Fprintf(a.stderr, "warning: [vault] storage = \"file\": %s is stored unencrypted in %s (mode 0600)\n", name, v.Path())
		if !interactive {
			return withCode(ExitUsage, errors.New("refusing to store a secret unencrypted without confirmation: pass --yes"))
		}
		fmt.Fprint(a.stderr, "Store it anyway? [y/N] ")
		line, _ := bufio.NewReader(a.stdin).ReadString('\n')
		if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
			return withCode(ExitFailure, errors.New("not saved"))
		}
	}
	var value string
	if fromStdin {
		b, err := io.ReadAll(io.LimitReader(a.stdin, maxSecretSize+1))
		if err != nil {
			return withCode(ExitFailure, fmt.Errorf("cannot read the value from standard input: %w", err))
		}
		if len(b) > maxSecretSize {
			return withCode(ExitUsage, fmt.Errorf("the value is larger than %d bytes", maxSecretSize))
		}
		value = secrets.TrimNewline(string(b))
	} else {
		if value, err = a.promptSecret(name); err != nil {
			return err
		}
	}
	if value == "" {
		return withCode(ExitUsage, secrets.ErrEmptyValue)
	}
	if len(value) < secrets.MinRedactLen {
		return withCode(ExitUsage, secrets.ErrShortValue)
	}
	if err := v.Set(name, value); err != nil {
		return withCode(ExitFailure, err)
	}
	if !a.opts.quiet {
		fmt.Fprintf(a.stdout, "saved %s\n", name)
	}
	return nil
}

// promptSecret asks for a value twice without echo on the stdin terminal.
func (a *app) promptSecret(name string) (string, error) {
	fd := int(a.stdin.(*os.File).Fd())
	ask := func(prompt string) (string, error) {
		fmt.Fprint(a.stderr, prompt)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", withCode(ExitFailure, fmt.Errorf("cannot read the value: %w", err))
		}
		return secrets.TrimNewline(string(b)), nil
	}
	first, err := ask(fmt.Sprintf("Value of %s: ", name))
	if err != nil || first == "" {
		return first, err
	}
	again, err := ask("Repeat the value: ")
	if err != nil {
		return "", err
	}
	if again != first {
		return "", withCode(ExitUsage, errors.New("the two values do not match; nothing saved"))
	}
	return first, nil
}

func (a *app) secretsList() error {
	v, _, err := a.openVaultForCommand()
	if err != nil {
		return err
	}
	entries, err := v.List()
	if err != nil {
		return withCode(ExitFailure, err)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVALUE\tSAVED AT")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, e.Preview, e.SavedAt.Local().Format(time.RFC3339))
	}
	return tw.Flush()
}

func (a *app) secretsRemove(name string) error {
	if err := checkSecretName(name); err != nil {
		return err
	}
	v, _, err := a.openVaultForCommand()
	if err != nil {
		return err
	}
	found, err := v.Delete(name)
	if err != nil {
		return withCode(ExitFailure, err)
	}
	if !found {
		return withCode(ExitFailure, fmt.Errorf("no secret %s in the vault (%s)", name, v.Path()))
	}
	if !a.opts.quiet {
		fmt.Fprintf(a.stdout, "removed %s\n", name)
	}
	return nil
}
